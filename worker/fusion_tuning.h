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
  FusionTuning(const FusionSettings& settings, transport::Communicator* comm,
               std::chrono::milliseconds timeout);

  size_t threshold() const { return threshold_; }
  bool settled() const { return tuner_.settled(); }
  std::string Describe() const;

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
  // was under way starts again with its warm-up. Returns false (nothing changed) when `trials`
  // does not parse.
  bool ImportState(const std::string& trials);

 private:
  FusionSettings settings_;
  transport::Communicator* comm_;
  std::chrono::milliseconds timeout_;
  fusion::FusionTuner tuner_;
  size_t threshold_;
  int boundary_in_trial_ = 0;
  std::chrono::steady_clock::time_point measure_begin_;
};

}  // namespace herd::worker
