// herd_sparse_bench: per-call time of SparDL, TopA and the dense ring all-reduce (fp32,
// average), ranks as threads over loopback or as processes over UCX (bench/percall/per_call.h):
//
//   herd_sparse_bench --ranks 4,6 --count 25000000 --density 0.01 --transport ucx,loopback
//
// prints a Markdown table (docs/sparse.md) on stdout and progress on stderr; --json prints the
// rows as JSON lines instead. With --rank and --store it is one UCX rank process, started by
// the driver (this same executable) for every rank.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/percall/per_call.h"
#include "bench/rank.h"

namespace herd::bench {
namespace {

// With, per (transport, ranks), each algorithm's speed-up over the ring all-reduce.
std::string RenderTable(const std::vector<Row>& rows) {
  std::map<std::tuple<std::string, int>, double> ring;
  for (const Row& r : rows) {
    if (r.algo == "ring") ring[{r.transport, r.ranks}] = r.median_ms;
  }
  std::string out =
      "| transport | P | algorithm | density | teams | median ms/call | mean | min | waiting "
      "| vs ring | non-zeros | identical |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const Row& r : rows) {
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

int Main(int argc, char** argv) {
  CLI::App app{"Per-call time of SparDL, TopA and the dense ring all-reduce (fp32, average)"};
  PerCallSpec spec;
  spec.ops = {"spardl", "topa", "ring"};
  spec.params.count = 25'000'000;
  spec.params.average = true;
  std::vector<int> ranks = {4, 6};
  std::vector<std::string> transports = {"ucx", "loopback"};
  std::string sag = "auto", topk = "exact";
  int timeout_s = 120;
  bool json = false;
  RankFlags rank;
  app.add_option("--ranks", ranks, "Rank counts to measure (comma-separated)")
      ->delimiter(',')
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--count", spec.params.count, "fp32 elements per rank")->capture_default_str();
  app.add_option("--density", spec.params.density, "Fraction of each block delivered, in (0, 1]")
      ->capture_default_str();
  app.add_option("--algos", spec.ops, "Comma-separated subset of spardl,topa,ring")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--transport", transports, "Comma-separated subset of ucx,loopback")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--teams", spec.params.teams, "SparDL teams (must divide every rank count)")
      ->capture_default_str();
  app.add_option("--sag", sag, "SparDL SAG with teams > 1: auto, rsag or bsag")
      ->capture_default_str();
  app.add_option("--topk", topk, "Top-k method: exact or sampled")->capture_default_str();
  app.add_option("--warmup", spec.timing.warmup, "Untimed calls first")->capture_default_str();
  app.add_option("--iters", spec.timing.iters, "Timed calls")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--timeout-s", timeout_s, "Deadline of each call")->capture_default_str();
  app.add_flag("--json", json, "Rows as JSON lines instead of the table");
  rank.Register(app, /*required=*/false, /*ranks=*/false);
  CLI11_PARSE(app, argc, argv);

  auto sag_algo = sparse::ParseSagAlgorithm(sag);
  auto topk_method = sparse::ParseTopkMethod(topk);
  if (!sag_algo.ok() || !topk_method.ok()) {
    std::fprintf(stderr, "herd_sparse_bench: %s\n",
                 (!sag_algo.ok() ? sag_algo.status() : topk_method.status()).ToString().c_str());
    return 2;
  }
  spec.params.sag = *sag_algo;
  spec.params.topk = *topk_method;
  spec.params.timeout = std::chrono::seconds(timeout_s);
  if (rank.rank >= 0) {
    rank.ranks = ranks.front();
    return RunPerCallRank(rank, spec);
  }

  std::vector<Row> all;
  for (const std::string& transport : transports) {
    for (int p : ranks) {
      absl::StatusOr<std::vector<Row>> rows;
      if (transport == "loopback") {
        rows = RunLoopback(p, spec);
      } else if (transport == "ucx") {
        // The children measure exactly this spec, for one rank count.
        rows = RunUcxProcesses(
            p,
            {SelfExe(), "--count", absl::StrCat(spec.params.count), "--density",
             absl::StrFormat("%.17g", spec.params.density), "--teams",
             absl::StrCat(spec.params.teams), "--sag", sag, "--topk", topk, "--warmup",
             absl::StrCat(spec.timing.warmup), "--iters", absl::StrCat(spec.timing.iters),
             "--timeout-s", absl::StrCat(timeout_s), "--algos", absl::StrJoin(spec.ops, ",")},
            spec.params.timeout);
      } else {
        std::fprintf(stderr, "herd_sparse_bench: unknown transport '%s'\n", transport.c_str());
        return 2;
      }
      if (!rows.ok()) {
        std::fprintf(stderr, "herd_sparse_bench: %s P=%d: %s\n", transport.c_str(), p,
                     rows.status().ToString().c_str());
        return 1;
      }
      for (const Row& row : *rows) {
        if (json) std::printf("%s\n", ToJson(row).Write().c_str());
        std::fflush(stdout);
        all.push_back(row);
      }
    }
  }
  if (!json) std::fputs(RenderTable(all).c_str(), stdout);
  for (const Row& row : all) {
    if (!row.identical) return 1;  // a result that differs between ranks is a failure
  }
  return 0;
}

}  // namespace
}  // namespace herd::bench

int main(int argc, char** argv) { return herd::bench::Main(argc, argv); }
