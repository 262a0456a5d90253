#include "bench/tune.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/str_format.h"
#include "common/status.h"

namespace herd::bench {

namespace coll = collectives;

std::vector<coll::DecisionRule> RulesFromResults(const std::vector<BenchResult>& results, int ranks,
                                                 size_t dtype_bytes) {
  // op -> size -> (time, algorithm) of the fastest so far.
  std::map<coll::CollectiveOp, std::map<size_t, std::pair<double, coll::Algorithm>>> best;
  for (const BenchResult& r : results) {
    if (r.impl != "herd" || r.algo == "auto" || !r.measured()) continue;
    auto op = coll::ParseCollectiveOp(r.op);
    auto algo = coll::ParseAlgorithm(r.algo);
    if (!op.ok() || !algo.ok()) continue;  // alltoall has no table
    auto& cell = best[*op];
    auto it = cell.find(r.bytes);
    if (it == cell.end() || r.time_us < it->second.first) cell[r.bytes] = {r.time_us, *algo};
  }
  std::vector<coll::DecisionRule> rules;
  for (const auto& [op, by_size] : best) {
    for (auto it = by_size.begin(); it != by_size.end(); ++it) {
      auto next = std::next(it);
      if (next != by_size.end() && next->second.second == it->second.second) continue;
      coll::DecisionRule rule{op, ranks, dtype_bytes, coll::kUnbounded, it->second.second};
      if (next != by_size.end()) {
        rule.up_to_bytes = static_cast<size_t>(
            std::sqrt(static_cast<double>(it->first) * static_cast<double>(next->first)));
      }
      rules.push_back(rule);
    }
  }
  return rules;
}

std::vector<size_t> DefaultTuneSizes() {
  std::vector<size_t> sizes;
  for (size_t s = 1024; s <= (size_t{16} << 20); s *= 4) sizes.push_back(s);
  return sizes;
}

absl::Status MergeIntoTableFile(const std::string& path,
                                const std::vector<coll::DecisionRule>& rules) {
  coll::DecisionTable table;
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    HERD_ASSIGN_OR_RETURN(table, coll::DecisionTable::Load(path));
  }
  table.Merge(rules);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << table.Format();
    out.close();
    if (!out) {
      return absl::UnavailableError(absl::StrFormat("cannot write the decision table %s", tmp));
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrFormat("cannot rename %s to %s: %s", tmp, path, ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace herd::bench
