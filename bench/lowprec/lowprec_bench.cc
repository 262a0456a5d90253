// herd_lowprec_bench: per-call time of the low-precision and decentralized algorithms beside
// the dense ring all-reduce, with the ranks as separate processes over UCX (shared memory on
// one machine). The driver starts P copies of itself with --rank, collects each rank's time per
// call, and prints the slowest rank's per operation (a collective is as slow as its slowest
// rank):
//
//   herd_lowprec_bench --ranks 4 --count 25000000 --iters 10
//
// Columns: ms per call; "model GB/s" = count * 4 bytes / time, the rate at which the fp32
// model (or gradient) is synchronised, comparable across the operations.

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/lowprec/lowprec_rank.h"
#include "bench/process_group.h"

namespace herd::bench::lowprec {
namespace {

std::string SelfExe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("herd_lowprec_bench") : p.string();
}

int Drive(const RankOptions& o) {
  InstallInterruptHandlers();
  const char* base = std::getenv("TMPDIR");
  std::string dir = absl::StrFormat("%s/herd-lowprec-XXXXXX", base && *base ? base : "/tmp");
  if (mkdtemp(dir.data()) == nullptr) {
    std::fprintf(stderr, "cannot create a temporary directory: %s\n", std::strerror(errno));
    return 1;
  }
  std::vector<ChildSpec> children;
  for (int r = 0; r < o.ranks; ++r) {
    ChildSpec c;
    c.label = absl::StrFormat("rank %d", r);
    c.argv = {SelfExe(),
              "--rank",
              absl::StrCat(r),
              "--ranks",
              absl::StrCat(o.ranks),
              "--store",
              dir,
              "--count",
              absl::StrCat(o.count),
              "--iters",
              absl::StrCat(o.iters),
              "--warmup",
              absl::StrCat(o.warmup),
              "--compressor",
              o.compressor,
              "--timeout",
              absl::StrCat(o.timeout_s),
              "--ops",
              absl::StrJoin(o.ops, ","),
              "--segment-bytes",
              absl::StrCat(o.segment_bytes)};
    children.push_back(std::move(c));
  }
  std::map<std::string, double> slowest;  // op -> seconds per call
  RunOptions run;
  run.silence_timeout = std::chrono::seconds(o.timeout_s);
  run.on_stdout_line = [&](size_t, std::string_view line) {
    std::vector<std::string> f = absl::StrSplit(absl::string_view(line.data(), line.size()), ' ');
    double s = 0;
    if (f.size() == 3 && f[0] == "result" && absl::SimpleAtod(f[2], &s)) {
      slowest[f[1]] = std::max(slowest[f[1]], s);
    }
  };
  auto outcome = RunProcessGroup(children, run);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (!outcome.ok() || !outcome->ok()) {
    std::fprintf(stderr, "herd_lowprec_bench: %s\n",
                 outcome.ok() ? outcome->Describe().c_str()
                              : std::string(outcome.status().message()).c_str());
    return 1;
  }
  std::printf("P=%d N=%zu (%.1f MB fp32), %d iterations after %d warm-up, compressor %s\n", o.ranks,
              o.count, o.count * 4 / 1e6, o.iters, o.warmup, o.compressor.c_str());
  std::printf("| operation | ms per call | model GB/s |\n| --- | ---: | ---: |\n");
  for (const std::string& op : o.ops) {
    const double s = slowest[op];
    std::printf("| %s | %.1f | %.2f |\n", op.c_str(), s * 1e3, s > 0 ? o.count * 4 / s / 1e9 : 0);
  }
  return 0;
}

}  // namespace
}  // namespace herd::bench::lowprec

int main(int argc, char** argv) {
  using herd::bench::lowprec::RankOptions;
  RankOptions o;
  o.rank = -1;
  o.ranks = 4;
  o.count = 25'000'000;
  std::string ops = absl::StrJoin(herd::bench::lowprec::kOps, ",");
  CLI::App app{
      "herd_lowprec_bench: per-call time of clps, decentralized (D_FP_S, D_LP_S) and "
      "the dense ring all-reduce, ranks as processes over UCX"};
  app.add_option("--ranks", o.ranks, "number of rank processes")->check(CLI::Range(1, 64));
  app.add_option("--count", o.count, "fp32 values per rank");
  app.add_option("--iters", o.iters, "timed calls per operation")->check(CLI::Range(1, 100000));
  app.add_option("--warmup", o.warmup, "untimed calls first")->check(CLI::Range(0, 1000));
  app.add_option("--ops", ops, "comma-separated: clps,decentralized,decentralized_lp,allreduce");
  app.add_option("--compressor", o.compressor, "for clps and decentralized_lp");
  app.add_option("--timeout", o.timeout_s, "seconds for any one wait");
  app.add_option("--segment-bytes", o.segment_bytes,
                 "message size of decentralized (bytes) and decentralized_lp (4 bytes a value)")
      ->check(CLI::Range(size_t{4}, size_t{1} << 40));
  app.add_option("--rank", o.rank, "(internal) run as this rank");
  app.add_option("--store", o.store_dir, "(internal) bootstrap directory");
  CLI11_PARSE(app, argc, argv);
  o.ops = absl::StrSplit(ops, ',', absl::SkipEmpty());
  if (o.rank >= 0) return herd::bench::lowprec::RunRank(o);
  return herd::bench::lowprec::Drive(o);
}
