#pragma once
// The measurements that show what an emulated cluster (tools/emulator/cluster.h) delivers, run
// by one process per rank (`herd-emu probe-rank`, started by MeasureInCluster), on `bytes` of
// fp32 per rank (bytes / 4 values):
//   stream:    rank 0 sends `iters` messages of `bytes` to rank 1 (two in flight); the time
//              runs from a barrier to rank 1's acknowledgement of the last one.
//   allreduce: herd's all-reduce (sum) with `algo` (ring by default; hier, auto, ...);
//              `warmup` untimed rounds, a barrier, then `iters` timed back to back; the
//              slowest rank's time per call counts.
//   the communication modes' calls (bench/percall/ops.h): ring (sum), sparse (spardl, one
//              team), topk_allgather (topa), clps, decentralized (halves), decentralized_whole;
//              timed per call as herd_sparse_bench does (every call from this rank's gradient,
//              copied in untimed, after a barrier; residuals carry over); the slowest rank's
//              median call counts.
// Rank 0 prints one JSON line on stdout:
//   {"probe":"allreduce","ranks":4,"bytes":67108864,"iters":3,"seconds":0.81,"bits_per_s":..,
//    "density":0}
// where seconds is per call (stream: for the whole stream), bits_per_s the payload rate (stream:
// bytes moved / time; otherwise bytes / time, the algorithm bandwidth) and density that of
// sparse and topk_allgather (0 for the others).

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "bench/rank.h"
#include "common/json.h"
#include "tools/emulator/cluster.h"

namespace herd::emulator {

struct ProbeOptions {
  std::string probe = "allreduce";
  bench::RankFlags rank;
  size_t bytes = size_t{64} << 20;
  int iters = 3;
  int warmup = 1;
  double density = 0.01;      // sparse and topk_allgather
  std::string algo = "ring";  // allreduce: the algorithm (collectives/run.h names)
  int ranks_per_host = 1;     // ranks per emulated host (cluster.h)
  bool round_robin = false;   // rank r on host r mod H instead of r / G
  std::chrono::seconds timeout{300};
};

struct ProbeResult {
  std::string probe;
  std::string algo;  // allreduce: the algorithm that ran
  int ranks = 0;
  int ranks_per_host = 1;
  uint64_t bytes = 0;
  int iters = 0;
  double seconds = 0;     // per call, or for the whole stream
  double bits_per_s = 0;  // payload bits per second
  double density = 0;     // sparse and topk_allgather; 0 otherwise
};

// The per-call probes of the communication modes (not stream, not allreduce).
bool IsModeProbe(std::string_view name);

// The body of one rank process: its exit code.
int RunProbeRank(const ProbeOptions& options);

// Runs the probe in `cluster`: `exe` is the herd-emu binary (`exe probe-rank ...` on every rank).
absl::StatusOr<ProbeResult> MeasureInCluster(const Cluster& cluster, const std::string& exe,
                                             const ProbeOptions& probe);

json::Object ToJson(const ProbeResult& result);
absl::StatusOr<ProbeResult> ProbeResultFromJson(const json::Object& line);

}  // namespace herd::emulator
