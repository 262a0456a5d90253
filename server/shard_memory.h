#pragma once
// The memory a shard's engine allocates for its key range when it starts (server/engine.cc:
// per key, the parameters, the optimizer's slots, ps_sync's and ps_ec's round accumulator and
// ps_ec's residual, 4 bytes an element each), and the limit a shard holds it to, so that a key
// range it cannot hold is refused with RESOURCE_EXHAUSTED naming the job before anything is
// allocated, instead of the allocation killing the process (std::bad_alloc, or the kernel's
// OOM killer once zeroed pages are touched). The scheduler checks the same sum against its own
// per-shard limit at submission (scheduler/job_spec.cc, ShardStateBytes: keep the two in step).
//
// The limit: SetMaxStateBytes (`herd server --max-state-bytes`), else what this process can
// have: the least of the machine's physical memory, the cgroup's memory limit (v2 memory.max,
// v1 memory.limit_in_bytes) and the room left under RLIMIT_AS and RLIMIT_DATA.
//
// Not counted: a round's pushes that arrive before a lower rank's (ps_sync and ps_ec sum a
// round in rank order, holding those until their turn: at most workers - 1 copies of a key
// for the time of a round, like the gRPC messages they came in).

#include <cstdint>

#include "absl/status/status.h"
#include "server/shard_config.h"

namespace herd::server {

// Bytes the engine of `config` allocates for this shard's keys (config.shard).
int64_t EngineStateBytes(const ShardConfig& config);

// 0: the process's own limit (above).
void SetMaxStateBytes(int64_t bytes);
// The limit in effect, and where it comes from ("--max-state-bytes", "physical memory",
// "cgroup memory limit", "RLIMIT_AS", "RLIMIT_DATA").
int64_t MaxStateBytes(const char** source = nullptr);

// RESOURCE_EXHAUSTED naming the job, the shard, the bytes and the limit when this shard's key
// range does not fit; OK otherwise.
absl::Status CheckShardFits(const ShardConfig& config);

}  // namespace herd::server
