// herd-emu: the cluster emulator's command line (bench/emulator/cluster.h).
//   herd-emu probe --probe allreduce --ranks 4 --rate 1gbit --bytes 64M
//       builds a cluster, runs the probe (probe.h) in it, prints the measured time beside the
//       time the link rate allows, and tears the cluster down;
//   herd-emu cleanup [--all]
//       removes namespaces left by emulator processes that died (--all: every herd-emu one);
//   herd-emu probe-rank ...  (hidden) one rank of a probe, started by `probe`.

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <climits>
#include <cstdio>
#include <string>

#include "absl/strings/str_format.h"
#include "bench/emulator/cluster.h"
#include "bench/emulator/measure.h"
#include "bench/emulator/probe.h"
#include "bench/emulator/rate.h"
#include "bench/process_group.h"
#include "bench/sizes.h"

namespace herd::emulator {
namespace {

std::string SelfExe() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "herd-emu";
}

int Fail(const std::string& what, const absl::Status& st) {
  std::fprintf(stderr, "herd-emu %s: %s\n", what.c_str(), std::string(st.message()).c_str());
  return 1;
}

// The time the probe would take if its payload moved at exactly `rate`: a stream moves
// bytes x iters over one link; the ring all-reduce sends 2 (P-1)/P x bytes per rank, each
// rank's link busy the whole time (eq. 5 of the DeAR paper with alpha = 0).
double IdealSeconds(const ProbeResult& r, uint64_t rate) {
  const double bits = 8.0 * static_cast<double>(r.bytes);
  if (r.probe == "stream") return bits * r.iters / static_cast<double>(rate);
  return 2.0 * (r.ranks - 1) / r.ranks * bits / static_cast<double>(rate);
}

int Probe(ProbeOptions probe, const std::string& rate_text, const std::string& bytes_text,
          bool json) {
  auto rate = ParseRate(rate_text);
  if (!rate.ok()) return Fail("probe", rate.status());
  auto bytes = bench::ParseByteSize(bytes_text);
  if (!bytes.ok()) return Fail("probe", bytes.status());
  probe.bytes = *bytes;
  bench::InstallInterruptHandlers();
  auto cluster = Cluster::Create(probe.ranks, *rate);
  if (!cluster.ok()) return Fail("probe", cluster.status());
  auto result = MeasureInCluster(**cluster, SelfExe(), probe);
  if (!result.ok()) return Fail("probe", result.status());
  const double ideal = IdealSeconds(*result, *rate);
  if (json) {
    std::printf("%s\n", ToJsonLine(*result).c_str());
  } else {
    std::printf(
        "%s, %d ranks, %s each, link %s: %.4f s measured, %.4f s at the link rate "
        "(measured/ideal %.3f)\n",
        result->probe.c_str(), result->ranks, bench::FormatByteSize(result->bytes).c_str(),
        FormatRate(*rate).c_str(), result->seconds, ideal, result->seconds / ideal);
  }
  return 0;
}

int Cleanup(bool all) {
  std::vector<std::string> removed;
  absl::Status st = Cluster::CleanupLeftovers(all, &removed);
  for (const std::string& name : removed) std::printf("removed %s\n", name.c_str());
  if (!st.ok()) return Fail("cleanup", st);
  if (removed.empty()) std::printf("nothing to remove\n");
  return 0;
}

}  // namespace
}  // namespace herd::emulator

int main(int argc, char** argv) {
  using herd::emulator::ProbeOptions;
  CLI::App app{"herd-emu: ranks in network namespaces joined by rate-capped veth links"};
  app.require_subcommand(1);

  ProbeOptions probe;
  std::string rate = "1gbit", bytes = "64M";
  bool json = false;
  int timeout_s = 300;
  CLI::App* run = app.add_subcommand("probe", "Measure a stream or an all-reduce in a cluster");
  run->add_option("--probe", probe.probe, "allreduce | stream")->capture_default_str();
  run->add_option("--ranks", probe.ranks, "Ranks (namespaces)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  run->add_option("--rate", rate, "Link rate per rank and direction (1gbit, 10gbit, 200mbit)")
      ->capture_default_str();
  run->add_option("--bytes", bytes, "Message / vector size (64M, 4K, ...)")->capture_default_str();
  run->add_option("--iters", probe.iters, "Timed iterations (stream: messages)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  run->add_option("--warmup", probe.warmup, "Untimed all-reduce rounds first")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  run->add_flag("--json", json, "Print the result as one JSON line");

  bool all = false;
  CLI::App* cleanup = app.add_subcommand("cleanup", "Remove namespaces left by dead emulators");
  cleanup->add_flag("--all", all, "Remove every herd-emu-* namespace, also of live processes");

  CLI::App* rank = app.add_subcommand("probe-rank", "one rank of a probe");
  rank->group("");
  rank->add_option("--probe", probe.probe)->required();
  rank->add_option("--rank", probe.rank)->required();
  rank->add_option("--ranks", probe.ranks)->required()->check(CLI::Range(1, 4096));
  rank->add_option("--store", probe.store_dir)->required();
  rank->add_option("--bytes", probe.bytes)->required();
  rank->add_option("--iters", probe.iters);
  rank->add_option("--warmup", probe.warmup);
  rank->add_option("--timeout", timeout_s);

  CLI11_PARSE(app, argc, argv);
  probe.timeout = std::chrono::seconds(timeout_s);
  if (cleanup->parsed()) return herd::emulator::Cleanup(all);
  if (rank->parsed()) return herd::emulator::RunProbeRank(probe);
  return herd::emulator::Probe(probe, rate, bytes, json);
}
