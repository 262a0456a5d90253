#include "bench/table.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/sizes.h"

namespace herd::bench {
namespace {

struct Column {
  std::string impl, algo;
  bool has_wait = false;  // herd's results carry the time blocked in the transport
  std::string Label() const { return impl == "herd" ? "herd " + algo : impl + " " + algo; }
};

// Left-aligned first column, right-aligned others, two spaces between columns.
std::string Render(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      if (c > 0) line += "  ";
      const std::string pad(width[c] - row[c].size(), ' ');
      line += c == 0 ? row[c] + pad : pad + row[c];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string Time(double us) {
  if (us >= 1e5) return absl::StrFormat("%.0f", us);
  return absl::StrFormat("%.1f", us);
}

std::string OneTable(const std::string& op, const std::vector<const BenchResult*>& results) {
  std::vector<Column> columns;
  std::vector<size_t> sizes;
  // (requested size, column index) -> result
  std::map<std::pair<size_t, size_t>, const BenchResult*> cells;
  auto column_of = [&](const BenchResult& r) {
    for (size_t i = 0; i < columns.size(); ++i) {
      if (columns[i].impl == r.impl && columns[i].algo == r.algo) return i;
    }
    columns.push_back({r.impl, r.algo});
    return columns.size() - 1;
  };
  for (const BenchResult* r : results) {
    const size_t c = column_of(*r);
    if (std::find(sizes.begin(), sizes.end(), r->requested_bytes) == sizes.end()) {
      sizes.push_back(r->requested_bytes);
    }
    cells[{r->requested_bytes, c}] = r;
  }
  // herd's columns first, peers after, each group in order of appearance.
  std::stable_partition(columns.begin(), columns.end(),
                        [](const Column& c) { return c.impl == "herd"; });
  cells.clear();
  for (const BenchResult* r : results) cells[{r->requested_bytes, column_of(*r)}] = r;

  std::vector<size_t> herd_cols, peer_cols;
  for (size_t i = 0; i < columns.size(); ++i) {
    (columns[i].impl == "herd" ? herd_cols : peer_cols).push_back(i);
  }
  const bool one_herd = herd_cols.size() == 1;

  const BenchResult& first = *results.front();
  auto parsed = ParseBenchOp(op);
  const double factor = parsed.ok() ? BusBandwidthFactor(*parsed, first.ranks) : 0.0;
  std::string out = absl::StrFormat(
      "%s: %d ranks, %s; time in us per iteration (slowest rank), algbw and busbw in GB/s "
      "(10^9 bytes/s), busbw = algbw x %.3g\n",
      op, first.ranks, first.dtype, factor);

  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> head1 = {""}, head2 = {"size"};
  for (const BenchResult* r : results) {
    if (std::isfinite(r->wait_us)) columns[column_of(*r)].has_wait = true;
  }
  for (const Column& c : columns) {
    head1.insert(head1.end(), {c.Label(), "", ""});
    head2.insert(head2.end(), {"time_us", "algbw", "busbw"});
    if (c.has_wait) {
      head1.push_back("");
      head2.push_back("wait%");
    }
  }
  for (size_t h : herd_cols) {
    for (size_t p : peer_cols) {
      head1.push_back("");
      head2.push_back(
          absl::StrFormat("%s/%s", one_herd ? "herd" : columns[h].algo, columns[p].impl));
    }
  }
  rows.push_back(head1);
  rows.push_back(head2);

  std::vector<std::string> notes;
  for (size_t size : sizes) {
    std::vector<std::string> row = {FormatByteSize(size)};
    for (size_t c = 0; c < columns.size(); ++c) {
      auto it = cells.find({size, c});
      const size_t blanks = columns[c].has_wait ? 1 : 0;
      if (it == cells.end()) {
        row.insert(row.end(), {"-", "-", "-"});
        row.insert(row.end(), blanks, "-");
        continue;
      }
      const BenchResult& r = *it->second;
      if (!r.measured()) {
        row.insert(row.end(), {"n/a", "", ""});
        row.insert(row.end(), blanks, "");
        notes.push_back(
            absl::StrFormat("%s %s: %s", columns[c].Label(), FormatByteSize(size), r.detail));
        continue;
      }
      const bool failed = r.check == kCheckFailed;
      row.push_back(Time(r.time_us) + (failed ? "!" : ""));
      row.push_back(absl::StrFormat("%.3f", r.algbw_GBps()));
      row.push_back(absl::StrFormat("%.3f", r.busbw_GBps()));
      if (columns[c].has_wait) {
        row.push_back(std::isfinite(r.wait_us)
                          ? absl::StrFormat("%.0f", 100.0 * r.wait_us / r.time_us)
                          : std::string("-"));
      }
      if (failed) notes.push_back(absl::StrFormat("CHECK FAILED: %s", r.detail));
    }
    for (size_t h : herd_cols) {
      for (size_t p : peer_cols) {
        auto hi = cells.find({size, h}), pi = cells.find({size, p});
        if (hi == cells.end() || pi == cells.end() || !hi->second->measured() ||
            !pi->second->measured() || pi->second->algbw_gbps <= 0) {
          row.push_back("-");
        } else {
          row.push_back(absl::StrFormat("%.2fx", hi->second->algbw_gbps / pi->second->algbw_gbps));
        }
      }
    }
    rows.push_back(row);
  }
  out += Render(rows);
  for (const std::string& n : notes) out += "  note: " + n + "\n";
  return out;
}

}  // namespace

std::string RenderTables(const std::vector<BenchResult>& results) {
  std::vector<std::string> ops;
  for (const BenchResult& r : results) {
    if (std::find(ops.begin(), ops.end(), r.op) == ops.end()) ops.push_back(r.op);
  }
  std::vector<std::string> tables;
  for (const std::string& op : ops) {
    std::vector<const BenchResult*> mine;
    for (const BenchResult& r : results) {
      if (r.op == op) mine.push_back(&r);
    }
    tables.push_back(OneTable(op, mine));
  }
  return absl::StrJoin(tables, "\n");
}

}  // namespace herd::bench
