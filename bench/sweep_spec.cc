#include "bench/sweep_spec.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/pattern.h"
#include "bench/sizes.h"

namespace herd::bench {

int IterationsFor(const SweepSpec& spec, size_t bytes) {
  if (spec.iters > 0) return spec.iters;
  constexpr double kTargetBytes = double{1 << 30};
  const double n = std::ceil(kTargetBytes / static_cast<double>(std::max<size_t>(bytes, 1)));
  return static_cast<int>(std::clamp(n, 10.0, 500.0));
}

int WarmupFor(const SweepSpec& spec, size_t bytes) {
  if (spec.warmup >= 0) return spec.warmup;
  return std::clamp(IterationsFor(spec, bytes) / 5, 2, 50);
}

int FirstPointWarmupFor(const SweepSpec& spec, size_t bytes) {
  if (spec.warmup >= 0) return spec.warmup;
  constexpr size_t kMaxWarmupBytes = size_t{32} << 20;
  const size_t calls = std::min<size_t>(2048, kMaxWarmupBytes / std::max<size_t>(bytes, 1));
  return std::max(WarmupFor(spec, bytes), static_cast<int>(calls));
}

std::vector<std::string> SweepArgs(const SweepSpec& spec) {
  std::vector<std::string> ops, sizes;
  for (BenchOp op : spec.ops) ops.emplace_back(BenchOpName(op));
  for (size_t s : spec.sizes) sizes.push_back(absl::StrFormat("%u", s));
  std::vector<std::string> args = {
      "--ops",       absl::StrJoin(ops, ","),
      "--sizes",     absl::StrJoin(sizes, ","),
      "--dtype",     std::string(DTypeName(spec.dtype)),
      "--iters",     absl::StrFormat("%d", spec.iters),
      "--warmup",    absl::StrFormat("%d", spec.warmup),
      "--timeout-s", absl::StrFormat("%.3f", spec.timeout.count() / 1000.0)};
  if (!spec.algos.empty()) {
    args.push_back("--algos");
    args.push_back(absl::StrJoin(spec.algos, ","));
  }
  if (spec.check) args.push_back("--check");
  return args;
}

void SweepFlags::Register(CLI::App& app, bool for_users) {
  auto help = [&](const char* text) { return for_users ? std::string(text) : std::string(); };
  app.add_option("--ops", ops,
                 help("Comma-separated operations: allreduce, reduce_scatter, allgather, "
                      "broadcast, reduce, alltoall"))
      ->capture_default_str();
  app.add_option("--algos", algos,
                 help("Comma-separated herd algorithms, each run for every operation that has "
                      "it: ring, lp, tree (allreduce); ring (reduce_scatter); ring, rd, bruck "
                      "(allgather); lp, tree (broadcast, reduce); pairwise (alltoall). "
                      "Default: ring for the ring operations, lp for broadcast/reduce, "
                      "pairwise for alltoall"));
  app.add_option("--sizes", sizes,
                 help("Comma-separated message sizes in bytes, K/M/G = powers of 1024 "
                      "(e.g. 4K,64M,4000012). A size that is not a multiple of the element "
                      "size is rounded down to whole elements; peers that need equal blocks "
                      "(MPI, Gloo reduce_scatter/allgather/alltoall) round down further to a "
                      "multiple of the rank count. Default: 4K,16K,...,64M,256M"));
  app.add_option("--dtype", dtype, help("Element type: fp32, fp64, fp16, bf16"))
      ->capture_default_str();
  app.add_option("--iters", iters,
                 help("Timed iterations per measurement; 0 picks clamp(1GiB/size, 10, 500)"))
      ->capture_default_str();
  app.add_option("--warmup", warmup,
                 help("Untimed iterations before timing; -1 picks clamp(iters/5, 2, 50)"))
      ->capture_default_str();
  app.add_flag("--check", check,
               help("Fill inputs from a per-rank function before a checked run and verify "
                    "every rank's result; a mismatch fails the command"));
  app.add_option("--timeout-s", timeout_s,
                 help("Longest any wait may take (bootstrap, one collective); a rank silent "
                      "for longer is killed and reported"))
      ->capture_default_str();
}

absl::StatusOr<SweepSpec> SweepFlags::ToSpec() const {
  SweepSpec spec;
  auto ops_or = ParseBenchOpList(ops);
  if (!ops_or.ok())
    return absl::InvalidArgumentError(
        absl::StrFormat("--ops: %s", std::string(ops_or.status().message())));
  spec.ops = *ops_or;
  if (!algos.empty()) {
    for (absl::string_view a : absl::StrSplit(algos, ',')) spec.algos.emplace_back(a);
  }
  // Validates the algorithm names against the operations up front.
  auto plan = PlanHerdRuns(spec.ops, spec.algos);
  if (!plan.ok()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--algos: %s", std::string(plan.status().message())));
  }
  if (sizes.empty()) {
    spec.sizes = DefaultSizes();
  } else {
    auto sizes_or = ParseByteSizeList(sizes);
    if (!sizes_or.ok()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--sizes: %s", std::string(sizes_or.status().message())));
    }
    spec.sizes = *sizes_or;
  }
  auto dtype_or = ParseDType(dtype);
  if (!dtype_or.ok() || !PatternSupports(*dtype_or)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--dtype: '%s' is not one of fp32, fp64, fp16, bf16", dtype));
  }
  spec.dtype = *dtype_or;
  for (size_t s : spec.sizes) {
    if (ElementCount(s, spec.dtype) == 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--sizes: %u bytes is less than one %s element (%u bytes)", s,
                          DTypeName(spec.dtype), DTypeSize(spec.dtype)));
    }
  }
  if (iters < 0) return absl::InvalidArgumentError("--iters: must be >= 0 (0: automatic)");
  if (warmup < -1) return absl::InvalidArgumentError("--warmup: must be >= 0 (-1: automatic)");
  spec.iters = iters;
  spec.warmup = warmup;
  spec.check = check;
  if (!(timeout_s > 0) || timeout_s > 86400) {
    return absl::InvalidArgumentError("--timeout-s: must be in (0, 86400]");
  }
  spec.timeout = std::chrono::milliseconds(static_cast<int64_t>(std::llround(timeout_s * 1000)));
  return spec;
}

}  // namespace herd::bench
