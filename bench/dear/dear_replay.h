#pragma once
// `herd-emu dear`: the DeAR replay benchmark. For each link rate an emulated cluster
// (cluster.h) is built; for each model (model_profile.h) one set of rank processes runs the
// replay (replay.h) of these configurations, in interleaved rounds:
//
//   comm only    allreduce and dear with no compute at the fixed threshold: the measured
//                t_ar, and t_rs / t_ag (dear's backward and forward phases)
//   WFBP         mode allreduce at the fixed threshold (buckets all-reduced during backward)
//   DeAR fixed   mode dear at the fixed threshold
//   DeAR grid    mode dear at each grid threshold
//   DeAR tuned   mode dear with the online tuner, measured after it settled
//
// and prints, per model and rate, the measurements beside the DeAR paper's model (eq. 6-9,
// dear_theory.h) fed with the nominal compute times and the measured communication times:
// the predicted gain of DeAR over WFBP (eq. 8 - eq. 7), the measured one and their ratio,
// S_max against the measured speedup, and the tuner against the best grid threshold.
//
// Dilation: with dilate D the link runs at rate / D and the compute at D times its length,
// and every time is reported divided by D: a rate the machine cannot carry (10 Gbit/s through
// veths on two cores) emulated on a slower clock. Only the fixed software costs per message
// (microseconds) shrink by D as well.

#include <cstdint>
#include <string>
#include <vector>

#include "bench/dear/replay.h"
#include "bench/rank.h"

namespace herd::emulator {

struct DearBenchOptions {
  std::vector<std::string> models = {"resnet50", "bert-base"};
  std::vector<uint64_t> rates = {1'000'000'000};
  int dilate = 1;
  int ranks = 4;
  int ranks_per_host = 1;  // ranks per emulated host: shared memory among them (cluster.h)
  double compute_scale = 1.0;
  size_t threshold = size_t{25} << 20;
  std::vector<size_t> grid = {size_t{64} << 10, size_t{256} << 10, size_t{1} << 20,
                              size_t{4} << 20,  size_t{16} << 20,  size_t{64} << 20};
  int rounds = 3;    // each configuration's median round is reported
  int warmup = 1;    // per configuration and round
  int iters = 3;     // per configuration and round
  bool tune = true;  // also measure dear with the online tuner
  int tune_trials = 10;
  int iterations_per_trial = 3;
  int timeout_s = 900;  // for any wait; and the longest the ranks may stay silent
  std::string exe;      // the herd-emu binary, started as `exe dear-rank ...` on every rank
  bool json = false;
};

// Prints the report on stdout (with --json, one JSON line per model and rate instead).
// Returns the process exit code.
int RunDearBench(const DearBenchOptions& options);

// One rank process of the replay (`herd-emu dear-rank`, started by RunDearBench): RunReplay
// with the model named, on rank 0 one JSON line per configuration (bench/rank.h).
struct ReplayRankOptions {
  bench::RankFlags rank;
  std::string model = "resnet50";
  double compute_scale = 1.0;  // multiplies the model's compute times
  std::string configs;         // comma-separated ReplayConfig texts
  ReplayOptions replay;        // its `model` and `configs` are filled in from the above
};
int RunReplayRank(ReplayRankOptions options);

}  // namespace herd::emulator
