#pragma once
// The operations `herd bench collectives` measures, their names on the command line and in
// JSON, the herd algorithms each one can run, and the bus-bandwidth factor of each.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace herd::bench {

enum class BenchOp : uint8_t {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kBroadcast,
  kReduce,
  kAllToAll,
};

std::string_view BenchOpName(BenchOp op);  // "allreduce", "reduce_scatter", ...
absl::StatusOr<BenchOp> ParseBenchOp(std::string_view name);
// Comma-separated, in the order given, duplicates dropped.
absl::StatusOr<std::vector<BenchOp>> ParseBenchOpList(std::string_view csv);
std::vector<BenchOp> AllBenchOps();

// The herd algorithms (collectives::AlgorithmName spelling) that run `op` on host memory, in
// the order the tables show them; the first is the default when --algos is not given.
const std::vector<std::string_view>& HerdAlgorithms(BenchOp op);

// What a sweep runs: for each op, the requested algorithms it supports, in the order of --algos
// (an empty request means each op's default). An algorithm name that no requested op supports
// is INVALID_ARGUMENT listing what each op supports; an op none of whose algorithms was
// requested is dropped and named in `skipped` so the caller can say so.
struct HerdPlan {
  std::vector<std::pair<BenchOp, std::string>> runs;
  std::vector<std::string> skipped;  // "broadcast (supports lp, tree)"
};
absl::StatusOr<HerdPlan> PlanHerdRuns(const std::vector<BenchOp>& ops,
                                      const std::vector<std::string>& algos);

// nccl-tests' bus bandwidth factor: busbw = algbw * factor, the fraction of the data each rank
// must move over its busiest link for an optimal algorithm. allreduce 2(P-1)/P; reduce_scatter,
// allgather and alltoall (P-1)/P; broadcast and reduce 1.
double BusBandwidthFactor(BenchOp op, int ranks);

}  // namespace herd::bench
