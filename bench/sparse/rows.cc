// herd_sparse_bench's rows: as JSON lines (from the rank processes to the driver) and as the
// Markdown table docs/sparse.md shows.

#include <map>
#include <tuple>

#include "absl/strings/str_format.h"
#include "bench/json_line.h"
#include "bench/sparse/sparse_bench.h"
#include "common/status.h"

namespace herd::bench::sparse {

std::string ToJson(const SparseBenchRow& r) {
  return JsonLineWriter()
      .Add("transport", r.transport)
      .Add("algo", r.algo)
      .Add("ranks", r.ranks)
      .Add("count", uint64_t{r.count})
      .Add("density", r.density)
      .Add("teams", r.teams)
      .Add("iters", r.iters)
      .Add("mean_ms", r.mean_ms)
      .Add("median_ms", r.median_ms)
      .Add("min_ms", r.min_ms)
      .Add("wait_ms", r.wait_ms)
      .Add("nonzeros", uint64_t{r.nonzeros})
      .Add("identical", r.identical)
      .str();
}

absl::StatusOr<SparseBenchRow> FromJson(const std::string& line) {
  HERD_ASSIGN_OR_RETURN(JsonObject o, ParseJsonLine(line));
  SparseBenchRow r;
  HERD_ASSIGN_OR_RETURN(r.transport, GetString(o, "transport"));
  HERD_ASSIGN_OR_RETURN(r.algo, GetString(o, "algo"));
  HERD_ASSIGN_OR_RETURN(double ranks, GetNumber(o, "ranks"));
  HERD_ASSIGN_OR_RETURN(double count, GetNumber(o, "count"));
  HERD_ASSIGN_OR_RETURN(r.density, GetNumber(o, "density"));
  HERD_ASSIGN_OR_RETURN(double teams, GetNumber(o, "teams"));
  HERD_ASSIGN_OR_RETURN(double iters, GetNumber(o, "iters"));
  HERD_ASSIGN_OR_RETURN(r.mean_ms, GetNumber(o, "mean_ms"));
  HERD_ASSIGN_OR_RETURN(r.median_ms, GetNumber(o, "median_ms"));
  HERD_ASSIGN_OR_RETURN(r.min_ms, GetNumber(o, "min_ms"));
  HERD_ASSIGN_OR_RETURN(r.wait_ms, GetNumber(o, "wait_ms"));
  HERD_ASSIGN_OR_RETURN(double nonzeros, GetNumber(o, "nonzeros"));
  HERD_ASSIGN_OR_RETURN(r.identical, GetBool(o, "identical"));
  r.ranks = static_cast<int>(ranks);
  r.count = static_cast<size_t>(count);
  r.teams = static_cast<int>(teams);
  r.iters = static_cast<int>(iters);
  r.nonzeros = static_cast<size_t>(nonzeros);
  return r;
}

std::string RenderTable(const std::vector<SparseBenchRow>& rows) {
  // The ring's time per (transport, ranks), for the speed-up column.
  std::map<std::tuple<std::string, int>, double> ring;
  for (const SparseBenchRow& r : rows) {
    if (r.algo == "ring") ring[{r.transport, r.ranks}] = r.median_ms;
  }
  std::string out =
      "| transport | P | algorithm | density | teams | median ms/call | mean | min | waiting "
      "| vs ring | non-zeros | identical |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const SparseBenchRow& r : rows) {
    auto it = ring.find({r.transport, r.ranks});
    const std::string speedup = it != ring.end() && r.median_ms > 0
                                    ? absl::StrFormat("%.2fx", it->second / r.median_ms)
                                    : "-";
    out +=
        absl::StrFormat("| %s | %d | %s | %g | %d | %.1f | %.1f | %.1f | %.1f | %s | %u | %s |\n",
                        r.transport, r.ranks, r.algo, r.density, r.teams, r.median_ms, r.mean_ms,
                        r.min_ms, r.wait_ms, speedup, r.nonzeros, r.identical ? "yes" : "NO");
  }
  return out;
}

}  // namespace herd::bench::sparse
