#include "bench/dear/dear_replay.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/dear/dear_theory.h"
#include "bench/dear/model_profile.h"
#include "bench/rank.h"
#include "bench/result.h"
#include "bench/sizes.h"
#include "common/status.h"
#include "tools/emulator/cluster.h"
#include "tools/emulator/rate.h"

namespace herd::emulator {
namespace {

// Runs every configuration of one model in one set of rank processes (interleaved rounds,
// replay.h); times come back divided by the dilation.
absl::StatusOr<std::vector<ReplayResult>> RunModel(const DearBenchOptions& o,
                                                   const Cluster& cluster, const std::string& model,
                                                   const std::vector<std::string>& configs) {
  std::vector<std::string> argv = {o.exe,
                                   "dear-rank",
                                   "--model",
                                   model,
                                   "--compute-scale",
                                   absl::StrFormat("%.17g", o.compute_scale * o.dilate),
                                   "--configs",
                                   absl::StrJoin(configs, ","),
                                   "--rounds",
                                   absl::StrFormat("%d", o.rounds),
                                   "--warmup",
                                   absl::StrFormat("%d", o.warmup),
                                   "--iters",
                                   absl::StrFormat("%d", o.iters),
                                   "--tune-trials",
                                   absl::StrFormat("%d", o.tune_trials),
                                   "--iterations-per-trial",
                                   absl::StrFormat("%d", o.iterations_per_trial),
                                   "--timeout",
                                   absl::StrFormat("%d", o.timeout_s)};
  std::fprintf(stderr, "herd-emu dear: %s, link %s: %s\n", model.c_str(),
               FormatRate(cluster.rate_bits_per_s()).c_str(), absl::StrJoin(configs, " ").c_str());
  HERD_ASSIGN_OR_RETURN(
      const std::vector<json::Object> lines,
      bench::RunRanks(model, argv, cluster.ranks(), std::chrono::seconds(o.timeout_s),
                      [&](int rank, ChildSpec child) { return cluster.Launch(rank, child); }));
  if (lines.size() != configs.size()) {
    return absl::InternalError(absl::StrFormat("%s: %d results for %d configurations", model,
                                               lines.size(), configs.size()));
  }
  std::vector<ReplayResult> results;
  for (const json::Object& line : lines) {
    HERD_ASSIGN_OR_RETURN(ReplayResult r, ReplayResultFromJson(line));
    for (double* t :
         {&r.iter_s, &r.forward_s, &r.backward_s, &r.end_s, &r.exposed_s, &r.tuning_s}) {
      *t /= o.dilate;
    }
    for (double& t : r.round_iter_s) t /= o.dilate;
    results.push_back(std::move(r));
  }
  return results;
}

double Ms(double s) { return s * 1e3; }

// 25M, 64K, or 1.73M for a tuned threshold that is no round number.
std::string Bytes(size_t b) {
  const std::string exact = bench::FormatByteSize(b);
  if (exact.back() >= 'A') return exact;
  return b >= (size_t{1} << 20) ? absl::StrFormat("%.2fM", b / 1048576.0)
                                : absl::StrFormat("%.0fK", b / 1024.0);
}

// Everything measured and predicted for one model at one rate.
struct Row {
  std::string model, rate;
  PhaseTimes t;            // nominal compute, measured communication
  double link_half_s = 0;  // the link-bound t_rs = t_ag (eq. 3-4 with alpha = 0)
  ReplayResult ar_comm, dear_comm, wfbp, dear_fixed;
  std::optional<ReplayResult> tuned;
  std::vector<ReplayResult> grid;  // the fixed threshold's run included, by threshold
  size_t best = 0;                 // index in grid of the fastest threshold
  const ReplayResult& best_grid() const { return grid[best]; }
};

// The median over rounds of a's iteration time minus b's: rounds with the same index ran back
// to back, so slow phases of the machine cancel out of each difference.
double PairedGain(const ReplayResult& a, const ReplayResult& b) {
  std::vector<double> d;
  for (size_t i = 0; i < a.round_iter_s.size() && i < b.round_iter_s.size(); ++i) {
    d.push_back(a.round_iter_s[i] - b.round_iter_s[i]);
  }
  return d.empty() ? a.iter_s - b.iter_s : bench::Median(d);
}

std::string Spread(const ReplayResult& r) {
  if (r.round_iter_s.empty()) return "";
  const auto [lo, hi] = std::minmax_element(r.round_iter_s.begin(), r.round_iter_s.end());
  return absl::StrFormat("(rounds %.0f..%.0f)", Ms(*lo), Ms(*hi));
}

void PrintRow(const DearBenchOptions& o, const Row& r) {
  const double eq8 = BaselineIterationTime(r.t), eq7 = DearIterationTime(r.t);
  const double predicted = eq8 - eq7, eq9 = Eq9Improvement(r.t);
  const double compute = r.t.ff + r.t.bp;
  const double smax = MaxSpeedup(r.t, o.ranks);
  // DeAR's figure: the tuned run, or without the tuner the best threshold of the grid.
  const ReplayResult& dear = r.tuned ? *r.tuned : r.best_grid();
  const double gain_fixed = PairedGain(r.wfbp, r.dear_fixed);
  const double gain_best = PairedGain(r.wfbp, r.best_grid());
  const double gain = PairedGain(r.wfbp, dear);
  if (o.json) {
    json::Object w;
    w.Add("model", r.model)
        .Add("rate", r.rate)
        .Add("ranks", o.ranks)
        .Add("ranks_per_host", o.ranks_per_host)
        .Add("dilate", o.dilate)
        .Add("compute_scale", o.compute_scale)
        .Add("t_ff", r.t.ff)
        .Add("t_bp", r.t.bp)
        .Add("t_rs", r.t.rs)
        .Add("t_ag", r.t.ag)
        .Add("t_ar", r.t.ar)
        .Add("eq8_wfbp", eq8)
        .Add("eq7_dear", eq7)
        .Add("wfbp", r.wfbp.iter_s)
        .Add("dear_fixed", r.dear_fixed.iter_s)
        .Add("dear_best_grid", r.best_grid().iter_s)
        .Add("dear_best_grid_threshold", r.best_grid().threshold);
    if (r.tuned) {
      w.Add("dear_tuned", r.tuned->iter_s)
          .Add("dear_tuned_threshold", r.tuned->threshold)
          .Add("tuner_trials", r.tuned->tuner_trials);
    }
    w.Add("gain_predicted", predicted)
        .Add("gain_eq9", eq9)
        .Add("gain_fixed", gain_fixed)
        .Add("gain_best_grid", gain_best)
        .Add("gain", gain)
        .Add("s_max", smax)
        .Add("s", o.ranks * compute / dear.iter_s);
    bench::PrintLine(w);
    return;
  }
  const std::string fixed = Bytes(o.threshold);
  std::printf("\n== %s, %d ranks (%d per host), link %s%s, compute x%g ==\n", r.model.c_str(),
              o.ranks, o.ranks_per_host, r.rate.c_str(),
              o.dilate > 1 ? absl::StrFormat(" (dilated %dx)", o.dilate).c_str() : "",
              o.compute_scale);
  std::printf("compute (nominal): t_ff %.1f ms, t_bp %.1f ms\n", Ms(r.t.ff), Ms(r.t.bp));
  std::printf(
      "communication alone at %s: allreduce %.1f ms, dear %.1f ms (its backward %.1f, "
      "its forward %.1f); link-bound t_rs = t_ag = %.1f ms\n",
      fixed.c_str(), Ms(r.ar_comm.iter_s), Ms(r.dear_comm.iter_s),
      Ms(r.dear_comm.backward_s + r.dear_comm.end_s), Ms(r.dear_comm.forward_s), Ms(r.link_half_s));
  std::printf("model inputs: t_ar %.1f ms (mean of the two), t_rs = t_ag = %.1f ms\n", Ms(r.t.ar),
              Ms(r.t.ag));
  std::printf("WFBP %-6s       %8.1f ms %s   eq. 8: %8.1f ms\n", fixed.c_str(), Ms(r.wfbp.iter_s),
              Spread(r.wfbp).c_str(), Ms(eq8));
  std::printf("DeAR %-6s       %8.1f ms %s   eq. 7: %8.1f ms\n", fixed.c_str(),
              Ms(r.dear_fixed.iter_s), Spread(r.dear_fixed).c_str(), Ms(eq7));
  for (const ReplayResult& g : r.grid) {
    std::printf("DeAR grid %-6s  %8.1f ms %s\n", Bytes(g.threshold).c_str(), Ms(g.iter_s),
                Spread(g).c_str());
  }
  if (r.tuned) {
    std::printf(
        "DeAR tuned        %8.1f ms %s   settled on %s after %d trials (%d iterations, "
        "%.1f s); best grid %s: tuned/best %.3f\n",
        Ms(r.tuned->iter_s), Spread(*r.tuned).c_str(), Bytes(r.tuned->threshold).c_str(),
        r.tuned->tuner_trials, r.tuned->tuning_iterations, r.tuned->tuning_s,
        Bytes(r.best_grid().threshold).c_str(), r.tuned->iter_s / r.best_grid().iter_s);
  }
  std::printf(
      "gain over WFBP (median of paired rounds): predicted eq. 8 - eq. 7 %.1f ms "
      "(eq. 9: %.1f ms); DeAR %s %.1f ms (%.0f%%), best grid %s %.1f ms (%.0f%%)",
      Ms(predicted), Ms(eq9), fixed.c_str(), Ms(gain_fixed), 100 * gain_fixed / predicted,
      Bytes(r.best_grid().threshold).c_str(), Ms(gain_best), 100 * gain_best / predicted);
  if (r.tuned) std::printf(", tuned %.1f ms (%.0f%%)", Ms(gain), 100 * gain / predicted);
  std::printf(
      "\nspeedup over one worker: S_max (eq. 6) %.2f; measured WFBP %.2f, DeAR %s %.2f "
      "(%.0f%% of S_max)\n",
      smax, o.ranks * compute / r.wfbp.iter_s, r.tuned ? "tuned" : "best grid",
      o.ranks * compute / dear.iter_s, 100 * o.ranks * compute / dear.iter_s / smax);
  std::fflush(stdout);
}

absl::StatusOr<Row> MeasureModel(const DearBenchOptions& o, const Cluster& cluster,
                                 const std::string& model_name, const std::string& rate) {
  HERD_ASSIGN_OR_RETURN(ModelProfile model, ModelByName(model_name));
  model.ScaleCompute(o.compute_scale);
  const std::string fixed = bench::FormatByteSize(o.threshold);
  std::vector<std::string> configs = {"allreduce:" + fixed + ":comm", "dear:" + fixed + ":comm",
                                      "allreduce:" + fixed, "dear:" + fixed};
  if (o.tune) configs.push_back("dear:tune");
  const size_t grid_begin = configs.size();
  for (size_t g : o.grid) {
    if (g != o.threshold) configs.push_back("dear:" + bench::FormatByteSize(g));
  }
  HERD_ASSIGN_OR_RETURN(const std::vector<ReplayResult> r,
                        RunModel(o, cluster, model_name, configs));
  Row row;
  row.model = model_name;
  row.rate = rate;
  row.t.ff = model.forward_s();
  row.t.bp = model.backward_s();
  // With hosts of several ranks the link-bound half is the hierarchy's: (H-1)/H of the
  // gradients through each host's link (eq. 5 over hosts).
  row.link_half_s = RingHalfSeconds(4.0 * model.parameters(), cluster.hosts(),
                                    static_cast<double>(cluster.rate_bits_per_s()) * o.dilate);
  row.ar_comm = r[0];
  row.dear_comm = r[1];
  // Both communication-only runs move every gradient through one RS and one AG: their mean is
  // t_ar with half the noise. The ring's halves move the same bytes in the same steps, so
  // t_rs = t_ag = t_ar / 2 (eq. 3-4); dear's own split is skewed by what else its two phases
  // do (gradient copies in backward, optimizer steps in forward) and only printed.
  row.t.ar = 0.5 * (r[0].iter_s + r[1].iter_s);
  row.t.rs = row.t.ag = 0.5 * row.t.ar;
  row.wfbp = r[2];
  row.dear_fixed = r[3];
  if (o.tune) row.tuned = r[4];
  row.grid.push_back(row.dear_fixed);
  for (size_t i = grid_begin; i < r.size(); ++i) row.grid.push_back(r[i]);
  std::sort(row.grid.begin(), row.grid.end(),
            [](const ReplayResult& a, const ReplayResult& b) { return a.threshold < b.threshold; });
  for (size_t i = 0; i < row.grid.size(); ++i) {
    if (row.grid[i].iter_s < row.grid[row.best].iter_s) row.best = i;
  }
  return row;
}

}  // namespace

int RunDearBench(const DearBenchOptions& o) {
  if (o.dilate < 1 || o.ranks < 1 || o.iters < 1 || o.exe.empty()) {
    std::fprintf(stderr, "herd-emu dear: need dilate >= 1, ranks >= 1, iters >= 1\n");
    return 2;
  }
  InstallInterruptHandlers();  // so that a Ctrl-C still tears the clusters down
  for (uint64_t rate : o.rates) {
    const uint64_t link = rate / static_cast<uint64_t>(o.dilate);
    auto cluster = Cluster::Create(o.ranks, link, o.ranks_per_host);
    if (!cluster.ok()) {
      std::fprintf(stderr, "herd-emu dear: %s\n", std::string(cluster.status().message()).c_str());
      return 1;
    }
    for (const std::string& model : o.models) {
      auto row = MeasureModel(o, **cluster, model, FormatRate(rate));
      if (!row.ok()) {
        std::fprintf(stderr, "herd-emu dear: %s at %s: %s\n", model.c_str(),
                     FormatRate(rate).c_str(), std::string(row.status().message()).c_str());
        return 1;
      }
      PrintRow(o, *row);
    }
  }
  return 0;
}

int RunReplayRank(ReplayRankOptions o) {
  transport::UcxOptions ucx;
  ucx.prefix = "replay";
  return bench::RunRank(o.rank, ucx, [&](transport::Communicator& comm) -> absl::Status {
    HERD_ASSIGN_OR_RETURN(o.replay.model, ModelByName(o.model));
    if (!(o.compute_scale >= 0)) return absl::InvalidArgumentError("compute scale < 0");
    o.replay.model.ScaleCompute(o.compute_scale);
    o.replay.configs.clear();
    for (absl::string_view text : absl::StrSplit(o.configs, ',', absl::SkipEmpty())) {
      HERD_ASSIGN_OR_RETURN(ReplayConfig c,
                            ParseReplayConfig(std::string_view(text.data(), text.size())));
      o.replay.configs.push_back(c);
    }
    if (comm.rank() == 0) {
      o.replay.progress = [](const std::string& line) {
        bench::PrintLine(json::Object().Add(bench::kProgressKey, line));
      };
    }
    HERD_ASSIGN_OR_RETURN(std::vector<ReplayResult> results, RunReplay(comm, o.replay));
    for (const ReplayResult& r : results) {
      if (comm.rank() == 0) bench::PrintLine(ToJson(r));
    }
    return absl::OkStatus();
  });
}

}  // namespace herd::emulator
