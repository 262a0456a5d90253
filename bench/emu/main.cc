// herd-emu: the cluster emulator's command line (tools/emulator/cluster.h).
//   herd-emu probe --probe allreduce --ranks 4 --rate 1gbit --bytes 64M
//       builds a cluster, runs the probe (probe.h) in it, prints the measured time beside the
//       time the link rate allows, and tears the cluster down;
//   herd-emu probe --probe sparse --density 0.01 --ranks 4 --rate 1gbit --bytes 100M
//       the same for one mode's per call time (ring, sparse, topk_allgather, clps,
//       decentralized, decentralized_whole);
//   herd-emu dear --models resnet50,bert-base --rates 1gbit,10gbit --ranks 4
//       the DeAR replay benchmark (bench/dear/dear_replay.h);
//   herd-emu elastic --mode allreduce --rate 1gbit
//       a real job of four workers on emulated hosts loses a worker and takes it back
//       (bench/emu/elastic.h): detection, rollback and rejoin times against the link;
//   herd-emu cleanup [--all]
//       removes namespaces left by emulator processes that died (--all: every herd-emu one);
//   herd-emu probe-rank / dear-rank ...  (hidden) one rank, started by `probe` / `dear`.

#include <stdlib.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/dear/dear_replay.h"
#include "bench/emu/elastic.h"
#include "bench/emu/probe.h"
#include "bench/rank.h"
#include "bench/sizes.h"
#include "tools/emulator/cluster.h"
#include "tools/emulator/rate.h"

namespace herd::emulator {
namespace {

using bench::SelfExe;

int Fail(const std::string& what, const absl::Status& st) {
  std::fprintf(stderr, "herd-emu %s: %s\n", what.c_str(), std::string(st.message()).c_str());
  return 1;
}

// The time the probe would take if its payload moved at exactly `rate`, each rank's link busy
// the whole time (alpha = 0): a stream moves bytes x iters over one link; the ring all-reduce
// sends 2 (P-1)/P x bytes per rank (eq. 5 of the DeAR paper), clps the same in one byte per
// value; decentralized sends half the vector to each ring neighbour (with P > 2), and
// decentralized_whole the whole vector to each. 0 for the sparse probes
// (their volume depends on how the selections overlap).
double IdealSeconds(const ProbeResult& r, uint64_t rate, bool round_robin) {
  const double bits = 8.0 * static_cast<double>(r.bytes);
  const double link = static_cast<double>(rate);
  if (r.probe == "stream") return bits * r.iters / link;
  const double ring = 2.0 * (r.ranks - 1) / r.ranks * bits / link;
  // Hierarchical: each host's link carries 2 (H-1)/H of the vector (its G ranks' rails share
  // it); the flat ring over hosts of consecutive ranks sends its 2 (P-1)/P through the one
  // rank of each host that talks to the next host, so its ideal is the ring's.
  const int hosts = (r.ranks + r.ranks_per_host - 1) / std::max(1, r.ranks_per_host);
  if (r.probe == "allreduce" && r.algo == "hier" && hosts > 1) {
    return 2.0 * (hosts - 1) / hosts * bits / link;
  }
  // Round-robin placement: every edge of the flat ring crosses hosts, G of them per host link.
  if ((r.probe == "allreduce" || r.probe == "ring") && round_robin) return ring * r.ranks_per_host;
  if (r.probe == "allreduce" || r.probe == "ring") return ring;
  if (r.probe == "clps") return ring / 4;
  if (r.probe == "decentralized") return bits / link;
  if (r.probe == "decentralized_whole") return std::min(r.ranks - 1, 2) * bits / link;
  return 0;
}

int Probe(ProbeOptions probe, const std::string& rate_text, const std::string& bytes_text,
          bool json) {
  auto rate = ParseRate(rate_text);
  if (!rate.ok()) return Fail("probe", rate.status());
  auto bytes = bench::ParseByteSize(bytes_text);
  if (!bytes.ok()) return Fail("probe", bytes.status());
  probe.bytes = *bytes;
  InstallInterruptHandlers();
  auto cluster = Cluster::Create(probe.rank.ranks, *rate, probe.ranks_per_host, probe.round_robin);
  if (!cluster.ok()) return Fail("probe", cluster.status());
  auto result = MeasureInCluster(**cluster, SelfExe(), probe);
  if (!result.ok()) return Fail("probe", result.status());
  const double ideal = IdealSeconds(*result, *rate, probe.round_robin);
  if (json) {
    std::printf("%s\n", ToJson(*result).Write().c_str());
  } else if (ideal == 0) {
    std::printf("%s (density %g), %d ranks, %s each, link %s: %.4f s measured\n",
                result->probe.c_str(), result->density, result->ranks,
                bench::FormatByteSize(result->bytes).c_str(), FormatRate(*rate).c_str(),
                result->seconds);
  } else {
    std::printf(
        "%s%s, %d ranks (%d per host), %s each, link %s: %.4f s measured, %.4f s at the link "
        "rate (measured/ideal %.3f)\n",
        result->probe.c_str(), result->algo.empty() ? "" : (" " + result->algo).c_str(),
        result->ranks, result->ranks_per_host, bench::FormatByteSize(result->bytes).c_str(),
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

int Dear(DearBenchOptions o, const std::string& models, const std::string& rates,
         const std::string& threshold, const std::string& grid) {
  o.models = absl::StrSplit(models, ',', absl::SkipEmpty());
  auto parsed_rates = bench::ParseCsv<uint64_t>(rates, ParseRate);
  if (!parsed_rates.ok()) return Fail("dear", parsed_rates.status());
  o.rates = *parsed_rates;
  auto t = bench::ParseByteSize(threshold);
  if (!t.ok()) return Fail("dear", t.status());
  o.threshold = *t;
  o.grid.clear();
  if (grid != "none") {
    auto g = bench::ParseByteSizeList(grid);
    if (!g.ok()) return Fail("dear", g.status());
    o.grid.assign(g->begin(), g->end());
  }
  o.exe = SelfExe();
  return RunDearBench(o);
}

int Elastic(ElasticBenchOptions o, const std::string& rate_text) {
  auto rate = ParseRate(rate_text);
  if (!rate.ok()) return Fail("elastic", rate.status());
  o.rate = *rate;
  o.herd = (std::filesystem::path(SelfExe()).parent_path() / "herd").string();
  if (o.work_dir.empty()) {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "herd-emu-elastic-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      return Fail("elastic", absl::InternalError("cannot create a directory under /tmp"));
    }
    o.work_dir = tmpl;
  }
  InstallInterruptHandlers();
  auto r = RunElasticBench(o);
  if (!r.ok()) return Fail("elastic", r.status());
  const double link_ms = 8e3 * r->handover_bytes / static_cast<double>(o.rate);
  std::printf(
      "herd-emu elastic: mode %s, %d workers, link %s, MLP %d samples, batch %d, heartbeat "
      "timeout %llds; worker 1 killed at iteration %lld and started again (logs: %s)\n",
      o.mode.c_str(), o.workers, FormatRate(o.rate).c_str(), o.samples, o.batch,
      static_cast<long long>(o.heartbeat_timeout.count()),
      static_cast<long long>(r->killed_at_iteration), o.work_dir.c_str());
  std::printf("kill to detection: %.0f ms\n", r->kill_to_detection_ms);
  std::printf(
      "detection to every survivor past the new epoch: %.0f ms (%lld iteration(s) run again)\n",
      r->detection_to_resumed_ms, static_cast<long long>(r->iterations_rerun));
  std::printf(
      "rejoin: %.0f ms (state %.0f bytes = %.2f ms at the link rate, handed over in %.2f ms; the "
      "newcomer's own start %.0f ms, %.0f ms of it after it registered); target 2 s + 1.25 x "
      "bytes/link = %.0f ms: %s\n",
      r->rejoin_ms, r->handover_bytes, link_ms, r->handover_ms, r->newcomer_startup_ms,
      r->newcomer_startup_registered_ms, 2000 + 1.25 * link_ms,
      r->rejoin_ms <= 2000 + 1.25 * link_ms ? "met" : "NOT met");
  std::printf("in-memory commit %.3f ms per iteration of %.1f ms (%.2f %%)\n",
              r->commit_ms_per_iteration, r->iteration_ms,
              r->iteration_ms > 0 ? 100 * r->commit_ms_per_iteration / r->iteration_ms : 0.0);
  std::printf("test accuracy: undisturbed %.4f, with the kill and the rejoin %.4f\n",
              r->undisturbed_accuracy, r->accuracy);
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
  run->add_option("--probe", probe.probe,
                  "allreduce | stream | ring | sparse | topk_allgather | clps | decentralized | "
                  "decentralized_whole")
      ->capture_default_str();
  run->add_option("--density", probe.density, "sparse, topk_allgather: fraction delivered")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  probe.rank.ranks = 2;
  run->add_option("--ranks", probe.rank.ranks, "Ranks (namespaces)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  run->add_option("--rate", rate, "Link rate per host and direction (1gbit, 10gbit, 200mbit)")
      ->capture_default_str();
  run->add_option("--ranks-per-host", probe.ranks_per_host,
                  "Ranks per emulated host (shared memory among them, one capped link per host)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  run->add_flag("--round-robin", probe.round_robin,
                "Place rank r on host r mod H (default: hosts of consecutive ranks)");
  run->add_option("--algo", probe.algo,
                  "allreduce: the algorithm (ring, hier, auto, rh, ...: collectives/run.h)")
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
  probe.rank.Register(*rank, /*required=*/true);
  rank->add_option("--bytes", probe.bytes)->required();
  rank->add_option("--iters", probe.iters);
  rank->add_option("--warmup", probe.warmup);
  rank->add_option("--density", probe.density);
  rank->add_option("--algo", probe.algo);
  rank->add_option("--ranks-per-host", probe.ranks_per_host);
  rank->add_option("--timeout", timeout_s);

  herd::emulator::DearBenchOptions dear_options;
  std::string models = "resnet50,bert-base", rates = "1gbit", threshold = "25M",
              grid = "64K,256K,1M,4M,16M,64M";
  CLI::App* dear = app.add_subcommand(
      "dear",
      "DeAR replay: WFBP, DeAR with a fixed threshold, a grid of thresholds and the tuner on "
      "replayed ResNet-50 / BERT-Base iterations in an emulated cluster, beside eq. 6-9 of the "
      "DeAR paper");
  dear->add_option("--models", models, "Comma-separated: resnet50, bert-base")
      ->capture_default_str();
  dear->add_option("--rates", rates, "Comma-separated link rates")->capture_default_str();
  dear->add_option("--dilate", dear_options.dilate,
                   "Run the links at rate/D and the compute D times slower; report times / D")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  dear->add_option("--ranks", dear_options.ranks, "Ranks")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  dear->add_option("--ranks-per-host", dear_options.ranks_per_host,
                   "Ranks per emulated host (shared memory among them, one capped link per host)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  dear->add_option("--compute-scale", dear_options.compute_scale,
                   "Multiply the models' compute times (1: the paper's GPUs)")
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
  dear->add_option("--threshold", threshold, "The fixed fusion threshold")->capture_default_str();
  dear->add_option("--grid", grid,
                   "DeAR thresholds to measure besides the fixed one (none: no grid)")
      ->capture_default_str();
  dear->add_option("--rounds", dear_options.rounds,
                   "Interleaved rounds over the configurations; the median round counts")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  dear->add_option("--warmup", dear_options.warmup,
                   "Untimed iterations per configuration and round")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  dear->add_option("--iters", dear_options.iters, "Measured iterations per configuration and round")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  dear->add_option("--tune-trials", dear_options.tune_trials, "Tuner trial budget")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  dear->add_option("--iterations-per-trial", dear_options.iterations_per_trial,
                   "Measured iterations per tuner trial")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  dear->add_option("--timeout", dear_options.timeout_s, "Seconds per configuration")
      ->capture_default_str();
  bool no_tune = false;
  dear->add_flag("--no-tune", no_tune, "Leave out dear with the online tuner");
  dear->add_flag("--json", dear_options.json, "One JSON line per model and rate");

  herd::emulator::ReplayRankOptions replay;
  CLI::App* dear_rank = app.add_subcommand("dear-rank", "one rank of the DeAR replay");
  dear_rank->group("");
  replay.rank.Register(*dear_rank, /*required=*/true);
  dear_rank->add_option("--model", replay.model)->required();
  dear_rank->add_option("--configs", replay.configs)->required();
  dear_rank->add_option("--compute-scale", replay.compute_scale);
  dear_rank->add_option("--rounds", replay.replay.rounds);
  dear_rank->add_option("--tune-trials", replay.replay.tune_trials);
  dear_rank->add_option("--iterations-per-trial", replay.replay.iterations_per_trial);
  dear_rank->add_option("--warmup", replay.replay.warmup);
  dear_rank->add_option("--iters", replay.replay.iters);
  dear_rank->add_option("--timeout", timeout_s);

  herd::emulator::ElasticBenchOptions elastic_options;
  std::string elastic_rate = "1gbit";
  CLI::App* elastic = app.add_subcommand(
      "elastic",
      "A real elastic job on emulated hosts loses a worker to SIGKILL and takes it back: "
      "detection, rollback and rejoin times against the link");
  elastic->add_option("--mode", elastic_options.mode, "The job's mode (one that shrinks)")
      ->capture_default_str();
  elastic->add_option("--rate", elastic_rate, "Link rate per host and direction")
      ->capture_default_str();
  elastic->add_option("--workers", elastic_options.workers, "Workers (one host each)")
      ->check(CLI::Range(2, 64))
      ->capture_default_str();
  elastic->add_option("--samples", elastic_options.samples, "Training samples (one epoch)")
      ->check(CLI::Range(1000, 60000))
      ->capture_default_str();
  elastic->add_option("--work-dir", elastic_options.work_dir,
                      "State and logs (default: a new directory under /tmp, kept)");

  CLI11_PARSE(app, argc, argv);
  probe.timeout = std::chrono::seconds(timeout_s);
  if (cleanup->parsed()) return herd::emulator::Cleanup(all);
  if (rank->parsed()) return herd::emulator::RunProbeRank(probe);
  if (dear->parsed()) {
    dear_options.tune = !no_tune;
    return herd::emulator::Dear(dear_options, models, rates, threshold, grid);
  }
  if (elastic->parsed()) return herd::emulator::Elastic(elastic_options, elastic_rate);
  if (dear_rank->parsed()) {
    replay.replay.timeout = std::chrono::seconds(timeout_s);
    return herd::emulator::RunReplayRank(replay);
  }
  return herd::emulator::Probe(probe, rate, bytes, json);
}
