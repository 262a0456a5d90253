#include "bench/bench_op.h"

#include <algorithm>
#include <array>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace herd::bench {
namespace {

struct OpInfo {
  BenchOp op;
  std::string_view name;
};
constexpr std::array<OpInfo, 6> kOps = {{
    {BenchOp::kAllReduce, "allreduce"},
    {BenchOp::kReduceScatter, "reduce_scatter"},
    {BenchOp::kAllGather, "allgather"},
    {BenchOp::kBroadcast, "broadcast"},
    {BenchOp::kReduce, "reduce"},
    {BenchOp::kAllToAll, "alltoall"},
}};

// absl::StrJoin of this abseil cannot format std::string_view elements by itself.
std::string Join(const std::vector<std::string_view>& parts) {
  return absl::StrJoin(parts, ", ", [](std::string* out, std::string_view s) { out->append(s); });
}

std::string AllOpNames() {
  std::vector<std::string> names;
  for (const auto& info : kOps) names.emplace_back(info.name);
  return absl::StrJoin(names, ", ");
}

}  // namespace

std::string_view BenchOpName(BenchOp op) {
  for (const auto& info : kOps) {
    if (info.op == op) return info.name;
  }
  return "unknown";
}

absl::StatusOr<BenchOp> ParseBenchOp(std::string_view name) {
  for (const auto& info : kOps) {
    if (info.name == name) return info.op;
  }
  // The hyphenated spelling and the short forms people type.
  if (name == "reduce-scatter" || name == "rs") return BenchOp::kReduceScatter;
  if (name == "all-gather" || name == "ag") return BenchOp::kAllGather;
  if (name == "all-reduce" || name == "ar") return BenchOp::kAllReduce;
  if (name == "all-to-all") return BenchOp::kAllToAll;
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown operation '%s'; known: %s", name, AllOpNames()));
}

absl::StatusOr<std::vector<BenchOp>> ParseBenchOpList(std::string_view csv) {
  std::vector<BenchOp> ops;
  size_t start = 0;
  while (start <= csv.size()) {
    size_t comma = csv.find(',', start);
    if (comma == std::string_view::npos) comma = csv.size();
    auto op = ParseBenchOp(csv.substr(start, comma - start));
    if (!op.ok()) return op.status();
    if (std::find(ops.begin(), ops.end(), *op) == ops.end()) ops.push_back(*op);
    start = comma + 1;
  }
  return ops;
}

std::vector<BenchOp> AllBenchOps() {
  std::vector<BenchOp> ops;
  for (const auto& info : kOps) ops.push_back(info.op);
  return ops;
}

const std::vector<std::string_view>& HerdAlgorithms(BenchOp op) {
  // Mirrors algorithms/collectives/run.h without "native" (host memory has no native ops).
  static const std::vector<std::string_view> kAllReduceAlgos = {"ring", "lp", "tree"};
  static const std::vector<std::string_view> kReduceScatterAlgos = {"ring"};
  static const std::vector<std::string_view> kAllGatherAlgos = {"ring", "rd", "bruck"};
  static const std::vector<std::string_view> kRootedAlgos = {"lp", "tree"};
  static const std::vector<std::string_view> kAllToAllAlgos = {"pairwise"};
  switch (op) {
    case BenchOp::kAllReduce:
      return kAllReduceAlgos;
    case BenchOp::kReduceScatter:
      return kReduceScatterAlgos;
    case BenchOp::kAllGather:
      return kAllGatherAlgos;
    case BenchOp::kBroadcast:
    case BenchOp::kReduce:
      return kRootedAlgos;
    case BenchOp::kAllToAll:
      return kAllToAllAlgos;
  }
  return kAllToAllAlgos;
}

absl::StatusOr<HerdPlan> PlanHerdRuns(const std::vector<BenchOp>& ops,
                                      const std::vector<std::string>& algos) {
  HerdPlan plan;
  // Every requested name must mean something for at least one requested op: a typo ("rign")
  // should stop the run, not silently measure nothing.
  for (const std::string& algo : algos) {
    bool used = false;
    for (BenchOp op : ops) {
      const auto& supported = HerdAlgorithms(op);
      used |= std::find(supported.begin(), supported.end(), algo) != supported.end();
    }
    if (!used) {
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
    bool any = false;
    for (const std::string& algo : algos) {
      if (std::find(supported.begin(), supported.end(), algo) != supported.end()) {
        plan.runs.emplace_back(op, algo);
        any = true;
      }
    }
    if (!any) {
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
