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

// A new size's fastest algorithm replaces the previous size's pick only when that pick is more
// than 10 % slower: the spread between rounds of one cell on this shared machine.
constexpr double kSwitchMargin = 1.10;

namespace {

bool LayoutBound(coll::Algorithm a) {
  return a == coll::Algorithm::kShm || a == coll::Algorithm::kHierarchical;
}

// The fastest of `by_algo` (skipping the layout-bound algorithms when `flat_only`), or kAuto.
coll::Algorithm Fastest(const std::map<coll::Algorithm, double>& by_algo, bool flat_only) {
  coll::Algorithm best = coll::Algorithm::kAuto;
  double time = 0;
  for (const auto& [a, t] : by_algo) {
    if (flat_only && LayoutBound(a)) continue;
    if (best == coll::Algorithm::kAuto || t < time) {
      best = a;
      time = t;
    }
  }
  return best;
}

}  // namespace

std::vector<coll::DecisionRule> RulesFromResults(const std::vector<BenchResult>& results, int ranks,
                                                 size_t dtype_bytes, int hosts) {
  // op -> size -> algorithm -> time.
  std::map<coll::CollectiveOp, std::map<size_t, std::map<coll::Algorithm, double>>> times;
  for (const BenchResult& r : results) {
    if (r.impl != "herd" || r.algo == "auto" || !r.measured()) continue;
    auto op = coll::ParseCollectiveOp(r.op);
    auto algo = coll::ParseAlgorithm(r.algo);
    if (!op.ok() || !algo.ok()) continue;  // alltoall has no table
    times[*op][r.bytes][*algo] = r.time_us;
  }
  std::vector<coll::DecisionRule> rules;
  for (const auto& [op, by_size] : times) {
    // The pick per size, with hysteresis: the previous size's pick stays while it is within
    // kSwitchMargin of the fastest here, so that noise between near-equal algorithms does not
    // make the table switch back and forth.
    // At the largest measured size the hysteresis is not applied when the classic algorithm
    // is the fastest there: the classic takes over right above it anyway (below), and keeping
    // the previous pick would run it at that size where it was measured slower (recursive
    // halving's 16M reduce-scatter at P = 4, 9 % behind the ring).
    const coll::Algorithm classic = coll::ClassicAlgorithm(op);
    const size_t largest = by_size.rbegin()->first;
    struct Pick {
      size_t bytes;
      coll::Algorithm algorithm;
      coll::Algorithm fallback;  // kAuto: none
    };
    std::vector<Pick> picks;
    for (const auto& [bytes, by_algo] : by_size) {
      coll::Algorithm pick = Fastest(by_algo, /*flat_only=*/false);
      const double fastest = by_algo.at(pick);
      const bool classic_takes_over = bytes == largest && pick == classic;
      if (!picks.empty() && !classic_takes_over) {
        auto kept = by_algo.find(picks.back().algorithm);
        if (kept != by_algo.end() && kept->second <= kSwitchMargin * fastest) pick = kept->first;
      }
      coll::Algorithm fallback = coll::Algorithm::kAuto;
      if (LayoutBound(pick)) {
        fallback = Fastest(by_algo, /*flat_only=*/true);
        // The same hysteresis for the fallback, so that it does not zig-zag either.
        if (!picks.empty() && picks.back().fallback != coll::Algorithm::kAuto) {
          auto kept = by_algo.find(picks.back().fallback);
          if (kept != by_algo.end() && fallback != coll::Algorithm::kAuto &&
              kept->second <= kSwitchMargin * by_algo.at(fallback)) {
            fallback = kept->first;
          }
        }
      }
      picks.push_back({bytes, pick, fallback});
    }
    auto same = [](const Pick& a, const Pick& b) {
      return a.algorithm == b.algorithm && a.fallback == b.fallback;
    };
    const size_t first_rule = rules.size();
    for (size_t i = 0; i < picks.size(); ++i) {
      if (i + 1 < picks.size() && same(picks[i + 1], picks[i])) continue;
      coll::DecisionRule rule{
          op, ranks, dtype_bytes, coll::kUnbounded, picks[i].algorithm, picks[i].fallback, hosts};
      if (i + 1 < picks.size()) {
        rule.up_to_bytes = static_cast<size_t>(std::sqrt(static_cast<double>(picks[i].bytes) *
                                                         static_cast<double>(picks[i + 1].bytes)));
      }
      rules.push_back(rule);
    }
    // Above the largest measured size the table does not extrapolate: the classic algorithm
    // (bandwidth-optimal) takes over. A 16M pick extended to 256M once ran the reduce-scatter
    // at half the ring's speed (recursive halving's strided blocks, docs/BENCHMARKS.md). shm
    // and hier are pipelines that move every byte once, bandwidth-optimal themselves: they keep
    // the open end, with the classic algorithm as their fallback there.
    coll::DecisionRule& last = rules.back();
    if (LayoutBound(last.algorithm)) {
      if (last.fallback != classic) {
        if (rules.size() - first_rule > 0 && last.up_to_bytes == coll::kUnbounded) {
          last.up_to_bytes = picks.back().bytes;
          rules.push_back(
              {op, ranks, dtype_bytes, coll::kUnbounded, last.algorithm, classic, hosts});
        }
      }
    } else if (last.algorithm != classic) {
      last.up_to_bytes = picks.back().bytes;
      rules.push_back(
          {op, ranks, dtype_bytes, coll::kUnbounded, classic, coll::Algorithm::kAuto, hosts});
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
