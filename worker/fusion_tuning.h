#pragma once
// Online tuning of the fusion threshold (dear): runs the Bayesian-optimisation tuner of
// algorithms/fusion over trials of a few iterations each. Every rank measures its own iteration
// time; at the end of a trial the ranks agree on the slowest one (a max all-reduce of one
// value, on the executor's communication queue), feed the same number to the same seeded tuner,
// and so switch to the same next threshold at the same iteration. After the trial budget, or
// once the tuner sees nothing left to gain, the best threshold measured stays.
//
// Trial layout: the first iteration after a switch is a warm-up (new buffers, the all-gathers
// of the old layout draining) and is not measured; the next `iterations_per_trial` are.
//
// Warm start (settings.tune_warm_start): at the first boundary the ranks time a tiny
// all-reduce (t0: what one more bucket costs, its start-up on both halves) and a 1 MiB one
// (the time per byte beta of an all-reduce on this link), agree on the slowest rank's
// figures, and give the tuner the threshold that minimises the link model of what bucketing
// adds to an iteration, (M / x) t0 + x beta (M the gradient bytes: M / x buckets pay t0 each;
// one bucket's reduce-scatter at the end of backward and one's all-gather at the start of
// forward cannot overlap compute): x* = sqrt(M t0 / beta). docs/dear.md has the reasoning.

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "algorithms/fusion/tuner.h"
#include "transport/communicator.h"
#include "worker/executor.h"

namespace herd::worker {

class FusionTuning {
 public:
  // `model_bytes`: the gradient bytes bucketed (the warm start's M; 0 disables it).
  FusionTuning(const FusionSettings& settings, transport::Communicator* comm,
               std::chrono::milliseconds timeout, size_t model_bytes = 0);

  size_t threshold() const { return threshold_; }
  bool settled() const { return tuner_.settled(); }
  std::string Describe() const;
  // The warm start's threshold (0 before it ran or without it).
  size_t prior_bytes() const { return prior_bytes_; }

  // x* = sqrt(M t0 / beta), the link model's best threshold (0 when an input is not positive).
  static size_t ModelThreshold(size_t model_bytes, double tiny_seconds, double seconds_per_byte);

  // Called at the start of every iteration. `run_collective` runs an operation in order with the
  // executor's other communication and returns its status. Returns the threshold the next
  // iteration must use when it changes.
  absl::StatusOr<std::optional<size_t>> OnIterationBoundary(
      const std::function<absl::Status(std::function<absl::Status()>)>& run_collective);

  // The tuner's observations and choice, as text (checkpoint values): "fusion/trials" (the
  // measured "threshold:throughput" pairs in report order) and "fusion/threshold". Every rank
  // has the same (they agree on each measurement).
  void ExportState(std::map<std::string, std::string>& values) const;
  // Replays the trials into a fresh tuner (which is deterministic: the same reports give the
  // same proposals), so tuning goes on where it was instead of starting over; the trial that
  // was under way starts again with its warm-up. `prior` ("fusion/prior"): the exporting run's
  // warm-start outcome (0: it found none), so this one does not warm-start again and proposes
  // the same; absent when that run had not warm-started. Returns false (nothing changed) when
  // `trials` does not parse.
  bool ImportState(const std::string& trials, std::optional<size_t> prior);

 private:
  FusionSettings settings_;
  transport::Communicator* comm_;
  std::chrono::milliseconds timeout_;
  size_t model_bytes_;
  size_t prior_bytes_ = 0;
  bool warm_started_ = false;
  fusion::FusionTuner tuner_;
  size_t threshold_;
  int boundary_in_trial_ = 0;
  std::chrono::steady_clock::time_point measure_begin_;

  // Times the probes, agrees on them, sets the tuner's prior.
  absl::Status WarmStart(
      const std::function<absl::Status(std::function<absl::Status()>)>& run_collective);
};

}  // namespace herd::worker
