#include "bench/bench_op.h"

#include <algorithm>
#include <array>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/sizes.h"

namespace herd::bench {
namespace {

struct OpInfo {
  BenchOp op;
  std::string_view name;
  // Mirrors algorithms/collectives/run.h without "native" (host memory has no native ops).
  std::vector<std::string_view> herd_algorithms;
};

const std::array<OpInfo, 6>& Ops() {
  static const std::array<OpInfo, 6> kOps = {{
      {BenchOp::kAllReduce,
       "allreduce",
       {"auto", "ring", "lp", "tree", "rd", "rh", "oneshot", "shm", "hier"}},
      {BenchOp::kReduceScatter, "reduce_scatter", {"auto", "ring", "rh", "oneshot", "shm", "hier"}},
      {BenchOp::kAllGather, "allgather", {"auto", "ring", "rd", "bruck", "oneshot", "shm", "hier"}},
      {BenchOp::kBroadcast, "broadcast", {"auto", "lp", "tree", "shm", "hier"}},
      {BenchOp::kReduce, "reduce", {"auto", "lp", "tree"}},
      {BenchOp::kAllToAll, "alltoall", {"pairwise"}},
  }};
  return kOps;
}

// absl::StrJoin of this abseil cannot format std::string_view elements by itself.
std::string Join(const std::vector<std::string_view>& parts) {
  return absl::StrJoin(parts, ", ", [](std::string* out, std::string_view s) { out->append(s); });
}

bool Has(const std::vector<std::string_view>& algos, std::string_view algo) {
  return std::find(algos.begin(), algos.end(), algo) != algos.end();
}

}  // namespace

std::string_view BenchOpName(BenchOp op) { return Ops()[static_cast<size_t>(op)].name; }

absl::StatusOr<BenchOp> ParseBenchOp(std::string_view name) {
  std::vector<std::string_view> names;
  for (const auto& info : Ops()) {
    if (info.name == name) return info.op;
    names.push_back(info.name);
  }
  // The hyphenated spelling and the short forms people type.
  if (name == "reduce-scatter" || name == "rs") return BenchOp::kReduceScatter;
  if (name == "all-gather" || name == "ag") return BenchOp::kAllGather;
  if (name == "all-reduce" || name == "ar") return BenchOp::kAllReduce;
  if (name == "all-to-all") return BenchOp::kAllToAll;
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown operation '%s'; known: %s", name, Join(names)));
}

absl::StatusOr<std::vector<BenchOp>> ParseBenchOpList(std::string_view csv) {
  return ParseCsv<BenchOp>(csv, ParseBenchOp);
}

std::vector<BenchOp> AllBenchOps() {
  std::vector<BenchOp> ops;
  for (const auto& info : Ops()) ops.push_back(info.op);
  return ops;
}

const std::vector<std::string_view>& HerdAlgorithms(BenchOp op) {
  return Ops()[static_cast<size_t>(op)].herd_algorithms;
}

absl::StatusOr<HerdPlan> PlanHerdRuns(const std::vector<BenchOp>& ops,
                                      const std::vector<std::string>& algos) {
  HerdPlan plan;
  // Every requested name must mean something for at least one requested op: a typo ("rign")
  // should stop the run, not silently measure nothing.
  for (const std::string& algo : algos) {
    if (std::none_of(ops.begin(), ops.end(),
                     [&](BenchOp op) { return Has(HerdAlgorithms(op), algo); })) {
      std::vector<std::string> lines;
      for (BenchOp op : ops) {
        lines.push_back(absl::StrFormat("%s: %s", BenchOpName(op), Join(HerdAlgorithms(op))));
      }
      return absl::InvalidArgumentError(
          absl::StrFormat("algorithm '%s' runs none of the requested operations (%s)", algo,
                          absl::StrJoin(lines, "; ")));
    }
  }
  for (BenchOp op : ops) {
    const auto& supported = HerdAlgorithms(op);
    if (algos.empty()) {
      plan.runs.emplace_back(op, std::string(supported.front()));
      continue;
    }
    const size_t before = plan.runs.size();
    for (const std::string& algo : algos) {
      if (Has(supported, algo)) plan.runs.emplace_back(op, algo);
    }
    if (plan.runs.size() == before) {
      plan.skipped.push_back(absl::StrFormat("%s (supports %s)", BenchOpName(op), Join(supported)));
    }
  }
  return plan;
}

double BusBandwidthFactor(BenchOp op, int ranks) {
  if (ranks <= 0) return 0.0;
  const double p = ranks;
  switch (op) {
    case BenchOp::kAllReduce:
      return 2.0 * (p - 1.0) / p;
    case BenchOp::kReduceScatter:
    case BenchOp::kAllGather:
    case BenchOp::kAllToAll:
      return (p - 1.0) / p;
    case BenchOp::kBroadcast:
    case BenchOp::kReduce:
      return 1.0;
  }
  return 1.0;
}

}  // namespace herd::bench
