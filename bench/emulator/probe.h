#pragma once
// The measurements that show what an emulated cluster delivers, run by one process per rank
// (`herd-emu probe-rank`, started by MeasureInCluster):
//   stream:    rank 0 sends `iters` messages of `bytes` to rank 1 (two in flight); the time
//              runs from a barrier to rank 1's acknowledgement of the last one.
//   allreduce: herd's ring all-reduce (reduce-scatter + all-gather) of `bytes` of fp32 on
//              every rank; `warmup` untimed rounds, a barrier, then `iters` timed ones; the
//              slowest rank's time counts.
// Ranks bootstrap UCX through a FileStore in `store_dir` (on the shared filesystem: network
// namespaces do not separate files). Rank 0 prints one JSON line on stdout:
//   {"probe":"allreduce","ranks":4,"bytes":67108864,"iters":3,"seconds":0.81,"bits_per_s":..}
// where seconds is per iteration (allreduce) or for the whole stream, and bits_per_s the
// payload rate (stream: bytes moved / time; allreduce: bytes / time, the algorithm bandwidth).
// The per-call probes of the communication modes (ring, sparse, topk_allgather, clps,
// decentralized) are in mode_probes.h; their seconds are the slowest rank's median per call and
// their lines carry "density" (sparse and topk_allgather; 0 for the others).

#include <chrono>
#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "bench/json_line.h"

namespace herd::emulator {

struct ProbeOptions {
  std::string probe = "allreduce";  // or "stream", or a mode probe (mode_probes.h)
  int rank = 0;
  int ranks = 2;
  std::string store_dir;
  size_t bytes = size_t{64} << 20;
  int iters = 3;
  int warmup = 1;
  double density = 0.01;  // sparse and topk_allgather
  std::chrono::seconds timeout{300};
};

struct ProbeResult {
  std::string probe;
  int ranks = 0;
  size_t bytes = 0;
  int iters = 0;
  double seconds = 0;     // per iteration (allreduce, mode probes) or in all (stream)
  double bits_per_s = 0;  // payload bits per second
  double density = 0;     // sparse and topk_allgather; 0 otherwise
};

// The body of one rank process: 0 on success, 1 after printing "rank R: <error>" on stderr.
int RunProbeRank(const ProbeOptions& options);

std::string ToJsonLine(const ProbeResult& result);
absl::StatusOr<ProbeResult> ParseProbeResult(std::string_view line);

}  // namespace herd::emulator
