#pragma once
// The DeAR replay on one rank: drives worker executors (worker/executor.h) through a model's
// iterations as a training loop would, with each layer's compute spent by a Pacer:
//
//   BeginIteration(i)
//   for each layer, in forward order:   BeforeForward(t) for its tensors; spend its forward
//   for each layer, in reverse order:   spend its backward; GradientReady(t) for its tensors
//   EndBackward()
//
// Several configurations (mode, threshold, compute on or off) are measured in interleaved
// rounds, a fresh executor each time, and each configuration's median round is reported: on a
// machine shared with other work, load changes then hit every configuration alike. A tuned
// configuration first runs the executor's online tuner until it settles and is then measured
// like the others at the threshold the tuner chose. Every rank must run the same options (the
// executors' collectives meet only if all ranks make the same calls).

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/dear/model_profile.h"
#include "common/json.h"
#include "transport/communicator.h"

namespace herd::emulator {

struct ReplayConfig {
  std::string mode = "dear";  // a dense collective mode of the worker: allreduce, dear, lp
  size_t threshold_bytes = size_t{25} << 20;  // tuned: where the tuner starts nothing; unused
  bool compute = true;  // false: communication only (every layer's compute is 0)
  bool tune = false;    // dear: tune the threshold online first
};

// "dear:25M", "allreduce:25M:comm", "dear:tune"; INVALID_ARGUMENT otherwise.
absl::StatusOr<ReplayConfig> ParseReplayConfig(std::string_view text);
std::string FormatReplayConfig(const ReplayConfig& c);

struct ReplayOptions {
  ModelProfile model;
  std::vector<ReplayConfig> configs;
  int rounds = 3;
  int warmup = 1;  // untimed iterations of each configuration in each round
  int iters = 3;   // measured iterations of each configuration in each round
  int tune_trials = 10;
  int iterations_per_trial = 3;
  size_t tune_min_bytes = size_t{64} << 10;
  size_t tune_max_bytes = size_t{64} << 20;
  std::chrono::seconds timeout{300};
  // Told a line after every measurement (may be empty); the rank process prints them, which
  // also shows its supervisor that it is alive.
  std::function<void(const std::string&)> progress;
};

struct ReplayResult {
  std::string config;     // FormatReplayConfig
  double iter_s = 0;      // iteration time (BeginIteration to the next), median round
  double forward_s = 0;   // from BeginIteration's return to the end of the last forward
  double backward_s = 0;  // the backward loop (compute + GradientReady calls)
  double end_s = 0;       // EndBackward (the exposed end of the reduce phase)
  double exposed_s = 0;   // what the executor reports blocked on communication
  size_t threshold = 0;   // the threshold measured (tuned: what the tuner settled on)
  int tuner_trials = 0;   // tuned: trials until it settled
  int tuning_iterations = 0;
  double tuning_s = 0;   // tuned: wall time of the tuning phase
  std::string describe;  // the executor's own summary
  // Every round's iteration time, in round order: rounds of different configurations with the
  // same index ran back to back, so their differences pair up (less noise than medians).
  std::vector<double> round_iter_s;
};

// One result per configuration, in order. Times are per iteration, the maximum over the ranks
// (a synchronous job runs at its slowest rank's pace) of each round's mean, median over rounds.
absl::StatusOr<std::vector<ReplayResult>> RunReplay(transport::Communicator& comm,
                                                    const ReplayOptions& o);

json::Object ToJson(const ReplayResult& r);
absl::StatusOr<ReplayResult> ReplayResultFromJson(const json::Object& line);

}  // namespace herd::emulator
