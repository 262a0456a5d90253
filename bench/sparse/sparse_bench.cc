// herd_sparse_bench: per-call time of SparDL, TopA and the dense ring all-reduce.
//
//   herd_sparse_bench --ranks 4,6 --count 25000000 --density 0.01 --transport ucx,loopback
//
// prints a Markdown table (docs/sparse.md) on stdout and progress on stderr; --json prints the
// rows as JSON lines instead. With --rank and --store it is one UCX rank process, started by
// the driver (the same executable) for every rank.

#include <unistd.h>

#include <climits>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/strings/str_format.h"

#include "bench/sparse/sparse_bench.h"

namespace {

namespace hbs = herd::bench::sparse;

std::string SelfExe() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "herd_sparse_bench";
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Per-call time of SparDL, TopA and the dense ring all-reduce (fp32, average)"};
  hbs::SparseBenchSpec spec;
  std::vector<int> ranks = {4, 6};
  std::vector<std::string> transports = {"ucx", "loopback"};
  std::string sag = "auto", topk = "exact";
  int timeout_s = 120, rank = -1;
  std::string store;
  bool json = false;
  app.add_option("--ranks", ranks, "Rank counts to measure (comma-separated)")
      ->delimiter(',')
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--count", spec.count, "fp32 elements per rank")->capture_default_str();
  app.add_option("--density", spec.density, "Fraction of each block delivered, in (0, 1]")
      ->capture_default_str();
  app.add_option("--algos", spec.algos, "Comma-separated subset of spardl,topa,ring")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--transport", transports, "Comma-separated subset of ucx,loopback")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--teams", spec.teams, "SparDL teams (must divide every rank count)")
      ->capture_default_str();
  app.add_option("--sag", sag, "SparDL SAG with teams > 1: auto, rsag or bsag")
      ->capture_default_str();
  app.add_option("--topk", topk, "Top-k method: exact or sampled")->capture_default_str();
  app.add_option("--warmup", spec.warmup, "Untimed calls first")->capture_default_str();
  app.add_option("--iters", spec.iters, "Timed calls")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--timeout-s", timeout_s, "Deadline of each call")->capture_default_str();
  app.add_flag("--json", json, "Rows as JSON lines instead of the table");
  app.add_option("--rank", rank, "(internal) this process is UCX rank R of the driver's run")
      ->group("");
  app.add_option("--store", store, "(internal) the bootstrap directory of the driver's run")
      ->group("");
  CLI11_PARSE(app, argc, argv);

  auto sag_algo = herd::sparse::ParseSagAlgorithm(sag);
  auto topk_method = herd::sparse::ParseTopkMethod(topk);
  if (!sag_algo.ok() || !topk_method.ok()) {
    std::fprintf(stderr, "herd_sparse_bench: %s\n",
                 (!sag_algo.ok() ? sag_algo.status() : topk_method.status()).ToString().c_str());
    return 2;
  }
  spec.sag = *sag_algo;
  spec.topk = *topk_method;
  spec.timeout = std::chrono::seconds(timeout_s);

  if (rank >= 0) return hbs::RunUcxRank(rank, ranks.front(), store, spec);

  std::vector<hbs::SparseBenchRow> all;
  for (const std::string& transport : transports) {
    for (int p : ranks) {
      absl::StatusOr<std::vector<hbs::SparseBenchRow>> rows;
      if (transport == "loopback") {
        rows = hbs::RunLoopback(p, spec);
      } else if (transport == "ucx") {
        // The children measure exactly this spec, for one rank count.
        std::vector<std::string> args = {"--ranks",     std::to_string(p),
                                         "--count",     std::to_string(spec.count),
                                         "--density",   absl::StrFormat("%.17g", spec.density),
                                         "--teams",     std::to_string(spec.teams),
                                         "--sag",       sag,
                                         "--topk",      topk,
                                         "--warmup",    std::to_string(spec.warmup),
                                         "--iters",     std::to_string(spec.iters),
                                         "--timeout-s", std::to_string(timeout_s)};
        std::string algos;
        for (const std::string& a : spec.algos) algos += (algos.empty() ? "" : ",") + a;
        args.insert(args.end(), {"--algos", algos});
        rows = hbs::RunUcxProcesses(p, SelfExe(), args);
      } else {
        std::fprintf(stderr, "herd_sparse_bench: unknown transport '%s'\n", transport.c_str());
        return 2;
      }
      if (!rows.ok()) {
        std::fprintf(stderr, "herd_sparse_bench: %s P=%d: %s\n", transport.c_str(), p,
                     rows.status().ToString().c_str());
        return 1;
      }
      for (const auto& row : *rows) {
        if (json) std::printf("%s\n", hbs::ToJson(row).c_str());
        std::fflush(stdout);
        all.push_back(row);
      }
    }
  }
  if (!json) std::fputs(hbs::RenderTable(all).c_str(), stdout);
  for (const auto& row : all) {
    if (!row.identical) return 1;  // a result that differs between ranks is a failure
  }
  return 0;
}
