// herd_lowprec_bench: per-call time of the low-precision and decentralized algorithms beside
// the dense ring all-reduce, with the ranks as separate processes over UCX (shared memory on
// one machine; bench/percall/per_call.h, loop timing). The driver starts P copies of itself
// with --rank and prints the slowest rank's time per call of each operation (a collective is
// as slow as its slowest rank):
//
//   herd_lowprec_bench --ranks 4 --count 25000000 --iters 10
//
// Columns: ms per call; "model GB/s" = count * 4 bytes / time, the rate at which the fp32
// model (or gradient) is synchronised, comparable across the operations.

#include <CLI/CLI.hpp>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/percall/per_call.h"
#include "bench/rank.h"

int main(int argc, char** argv) {
  using namespace herd::bench;
  PerCallSpec spec;
  spec.params.count = 25'000'000;
  spec.timing = {1, 5, /*per_call=*/false};
  RankFlags rank;
  rank.ranks = 4;
  std::string ops = "clps,decentralized,decentralized_lp,allreduce", compressor = "minmax_uint8";
  int timeout_s = 300;
  CLI::App app{
      "herd_lowprec_bench: per-call time of clps, decentralized (D_FP_S, D_LP_S) and "
      "the dense ring all-reduce, ranks as processes over UCX"};
  app.add_option("--ranks", rank.ranks, "number of rank processes")->check(CLI::Range(1, 64));
  app.add_option("--count", spec.params.count, "fp32 values per rank");
  app.add_option("--iters", spec.timing.iters, "timed calls per operation")
      ->check(CLI::Range(1, 100000));
  app.add_option("--warmup", spec.timing.warmup, "untimed calls first")->check(CLI::Range(0, 1000));
  app.add_option("--ops", ops, "comma-separated: clps,decentralized,decentralized_lp,allreduce");
  app.add_option("--compressor", compressor, "for clps and decentralized_lp");
  app.add_option("--timeout", timeout_s, "seconds for any one wait");
  app.add_option("--segment-bytes", spec.params.segment_bytes,
                 "message size of decentralized (bytes) and decentralized_lp (4 bytes a value)")
      ->check(CLI::Range(size_t{4}, size_t{1} << 40));
  rank.Register(app, /*required=*/false, /*ranks=*/false);
  CLI11_PARSE(app, argc, argv);
  auto c = herd::compression::ParseCompressor(compressor);
  if (!c.ok()) {
    std::fprintf(stderr, "herd_lowprec_bench: %s\n", std::string(c.status().message()).c_str());
    return 2;
  }
  spec.params.compressor = *c;
  spec.params.average = true;
  spec.params.timeout = std::chrono::seconds(timeout_s);
  for (absl::string_view op : absl::StrSplit(ops, ',', absl::SkipEmpty())) {
    spec.ops.push_back(op == "allreduce" ? "ring" : std::string(op));  // its name here
  }
  if (rank.rank >= 0) return RunPerCallRank(rank, spec);

  auto rows = RunUcxProcesses(
      rank.ranks,
      {SelfExe(), "--count", absl::StrCat(spec.params.count), "--iters",
       absl::StrCat(spec.timing.iters), "--warmup", absl::StrCat(spec.timing.warmup),
       "--compressor", compressor, "--timeout", absl::StrCat(timeout_s), "--ops", ops,
       "--segment-bytes", absl::StrCat(spec.params.segment_bytes)},
      spec.params.timeout);
  if (!rows.ok()) {
    std::fprintf(stderr, "herd_lowprec_bench: %s\n", std::string(rows.status().message()).c_str());
    return 1;
  }
  std::printf("P=%d N=%zu (%.1f MB fp32), %d iterations after %d warm-up, compressor %s\n",
              rank.ranks, spec.params.count, spec.params.count * 4 / 1e6, spec.timing.iters,
              spec.timing.warmup, compressor.c_str());
  std::printf("| operation | ms per call | model GB/s |\n| --- | ---: | ---: |\n");
  for (const Row& row : *rows) {
    const double s = row.mean_ms / 1e3;
    std::printf("| %s | %.1f | %.2f |\n", row.algo == "ring" ? "allreduce" : row.algo.c_str(),
                s * 1e3, s > 0 ? spec.params.count * 4 / s / 1e9 : 0);
  }
  return 0;
}
