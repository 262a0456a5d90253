#pragma once
// What one benchmark sweep measures, shared by the driver, herd's rank processes and the peer
// programs, and how it travels on their command lines. Every process of a sweep derives the
// same iteration counts from the same spec, so herd and its peers time the same work.

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/bench_op.h"
#include "common/dtype.h"

namespace CLI {
class App;
}

namespace herd::bench {

struct SweepSpec {
  std::vector<BenchOp> ops;
  std::vector<std::string> algos;  // herd algorithm names; empty: each op's default
  std::vector<size_t> sizes;       // bytes as requested (rounded down to whole elements)
  DType dtype = DType::kFloat32;
  int iters = 0;    // timed iterations per measurement; 0: IterationsFor's rule
  int warmup = -1;  // untimed iterations before them; -1: WarmupFor's rule
  bool check = false;
  // The longest any single wait may take (bootstrap, a collective, a barrier).
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
};

// Whole elements in `bytes` (rounded down).
inline size_t ElementCount(size_t bytes, DType dtype) { return bytes / DTypeSize(dtype); }

// The automatic counts aim at about 1 GiB moved per measurement so that large sizes take
// seconds, not minutes, on a small machine while small sizes still average out noise:
// iterations = clamp(1 GiB / bytes, 10, 500); warm-up = clamp(iterations / 5, 2, 50).
int IterationsFor(const SweepSpec& spec, size_t bytes);
int WarmupFor(const SweepSpec& spec, size_t bytes);
// The untimed calls of the first point a group of fresh processes measures: WarmupFor's, and at
// small sizes up to 2048 (at most 32 MiB moved). A fresh process pays the first touch of every
// page of its peers' shared-memory FIFOs (UCX maps 1024 16 KiB elements per peer and walks
// them in turn), and 50 calls of 4 KiB touch a small part of them: whichever algorithm ran
// first in a process group measured 2-2.5x slower at 4K and 16K than the same algorithm run
// second (docs/BENCHMARKS.md). An explicit --warmup is taken as given.
int FirstPointWarmupFor(const SweepSpec& spec, size_t bytes);

// The flags that reproduce `spec` on a child's command line (exact byte sizes, milliseconds).
std::vector<std::string> SweepArgs(const SweepSpec& spec);

// The sweep flags of every program that runs a sweep. Register() adds them to a CLI11 app;
// after parsing, ToSpec() validates and converts (INVALID_ARGUMENT names the bad flag).
struct SweepFlags {
  std::string ops = "allreduce,reduce_scatter,allgather";
  std::string algos;
  std::string sizes;  // empty: DefaultSizes()
  std::string dtype = "fp32";
  int iters = 0;
  int warmup = -1;
  bool check = false;
  double timeout_s = 60;

  // `for_users` adds the long help texts of `herd bench collectives`; the hidden rank command
  // and the peers take the same flags without them.
  void Register(CLI::App& app, bool for_users);
  absl::StatusOr<SweepSpec> ToSpec() const;
};

}  // namespace herd::bench
