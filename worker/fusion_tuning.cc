#include "worker/fusion_tuning.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "algorithms/collectives/allreduce.h"
#include "common/logging.h"
#include "common/status.h"

namespace herd::worker {
namespace {

fusion::TunerOptions TunerOptionsFrom(const FusionSettings& s) {
  fusion::TunerOptions o;
  o.min_bytes = s.tune_min_bytes;
  o.max_bytes = s.tune_max_bytes;
  o.max_trials = s.tune_trials;
  return o;
}

}  // namespace

FusionTuning::FusionTuning(const FusionSettings& settings, transport::Communicator* comm,
                           std::chrono::milliseconds timeout)
    : settings_(settings),
      comm_(comm),
      timeout_(timeout),
      tuner_(TunerOptionsFrom(settings)),
      threshold_(tuner_.Next()) {}

std::string FusionTuning::Describe() const {
  if (tuner_.settled()) {
    return absl::StrFormat("tuner settled on %d bytes after %d trials", tuner_.best(),
                           tuner_.trials());
  }
  return absl::StrFormat("tuner trial %d, trying %d bytes", tuner_.trials() + 1, threshold_);
}

absl::StatusOr<std::optional<size_t>> FusionTuning::OnIterationBoundary(
    const std::function<absl::Status(std::function<absl::Status()>)>& run_collective) {
  if (tuner_.settled()) return std::optional<size_t>();
  ++boundary_in_trial_;
  if (boundary_in_trial_ == 2) {  // the warm-up iteration is over
    measure_begin_ = std::chrono::steady_clock::now();
    return std::optional<size_t>();
  }
  if (boundary_in_trial_ < 2 + std::max(1, settings_.iterations_per_trial)) {
    return std::optional<size_t>();
  }
  double seconds[1] = {
      std::chrono::duration<double>(std::chrono::steady_clock::now() - measure_begin_).count() /
      std::max(1, settings_.iterations_per_trial)};
  // The slowest rank sets the pace of a synchronous job; agree on it.
  collectives::AllReduceOptions o;
  o.comm = comm_;
  o.dtype = DType::kFloat64;
  o.op = ReduceOp::kMax;
  o.data = seconds;
  o.count = 1;
  o.tag = (1u << 20) - 1;  // no bucket uses the last tag
  o.timeout = timeout_;
  HERD_RETURN_IF_ERROR(run_collective([o] { return collectives::RingAllReduce(o); }));
  tuner_.Report(threshold_, 1.0 / std::max(seconds[0], 1e-9));
  const size_t next = tuner_.settled() ? tuner_.best() : tuner_.Next();
  Log().info("dear tuner: {} bytes -> {:.2f} ms per iteration; next {} bytes{}", threshold_,
             seconds[0] * 1e3, next, tuner_.settled() ? " (settled)" : "");
  boundary_in_trial_ = 1;  // this boundary starts the next trial's warm-up
  const bool changed = next != threshold_;
  threshold_ = next;
  if (!changed) return std::optional<size_t>();
  return std::optional<size_t>(next);
}

void FusionTuning::ExportState(std::map<std::string, std::string>& values) const {
  std::vector<std::string> trials;
  for (const fusion::FusionTuner::Trial& t : tuner_.history()) {
    trials.push_back(absl::StrFormat("%d:%.17g", t.threshold, t.throughput));
  }
  values["fusion/trials"] = absl::StrJoin(trials, ",");
  values["fusion/threshold"] = absl::StrCat(threshold_);
}

bool FusionTuning::ImportState(const std::string& trials) {
  fusion::FusionTuner tuner(TunerOptionsFrom(settings_));
  for (const std::string& item :
       std::vector<std::string>(absl::StrSplit(trials, ',', absl::SkipEmpty()))) {
    std::vector<std::string> pair = absl::StrSplit(item, ':');
    size_t threshold = 0;
    double throughput = 0;
    if (pair.size() != 2 || !absl::SimpleAtoi(pair[0], &threshold) ||
        !absl::SimpleAtod(pair[1], &throughput)) {
      return false;
    }
    tuner.Report(threshold, throughput);
  }
  tuner_ = std::move(tuner);
  threshold_ = tuner_.settled() ? tuner_.best() : tuner_.Next();
  boundary_in_trial_ = 0;
  return true;
}

}  // namespace herd::worker
