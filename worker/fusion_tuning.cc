#include "worker/fusion_tuning.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "algorithms/collectives/allreduce.h"
#include "algorithms/collectives/run.h"
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

// The last tag (no bucket uses it) for the tuner's own collectives; they run one at a time on
// the executor's queue.
constexpr uint32_t kTunerTag = (1u << 20) - 1;

}  // namespace

FusionTuning::FusionTuning(const FusionSettings& settings, transport::Communicator* comm,
                           std::chrono::milliseconds timeout, size_t model_bytes)
    : settings_(settings),
      comm_(comm),
      timeout_(timeout),
      model_bytes_(model_bytes),
      tuner_(TunerOptionsFrom(settings)),
      threshold_(tuner_.Next()) {}

size_t FusionTuning::ModelThreshold(size_t model_bytes, double tiny_seconds,
                                    double seconds_per_byte) {
  if (model_bytes == 0 || !(tiny_seconds > 0) || !(seconds_per_byte > 0)) return 0;
  const double x = std::sqrt(static_cast<double>(model_bytes) * tiny_seconds / seconds_per_byte);
  return std::isfinite(x) ? static_cast<size_t>(std::max(1.0, x)) : 0;
}

absl::Status FusionTuning::WarmStart(
    const std::function<absl::Status(std::function<absl::Status()>)>& run_collective) {
  // The best of three of each probe: the minimum is the link, the rest is this machine's noise.
  constexpr size_t kBigBytes = size_t{1} << 20;
  const int P = comm_->size();
  std::vector<float> tiny(static_cast<size_t>(P)), big(kBigBytes / sizeof(float));
  auto time_one = [&](std::vector<float>& v, double* best) -> absl::Status {
    collectives::AllReduceOptions o;
    o.comm = comm_;
    o.data = v.data();
    o.count = v.size();
    o.tag = kTunerTag;
    o.timeout = timeout_;
    for (int i = 0; i < 3; ++i) {
      const auto begin = std::chrono::steady_clock::now();
      HERD_RETURN_IF_ERROR(run_collective([o] { return collectives::AllReduce(o); }));
      *best = std::min(
          *best, std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count());
    }
    return absl::OkStatus();
  };
  double seconds[2] = {1e9, 1e9};
  HERD_RETURN_IF_ERROR(time_one(tiny, &seconds[0]));
  HERD_RETURN_IF_ERROR(time_one(big, &seconds[1]));
  // Every rank must give the tuner the same prior: the slowest rank's figures.
  collectives::AllReduceOptions o;
  o.comm = comm_;
  o.dtype = DType::kFloat64;
  o.op = ReduceOp::kMax;
  o.data = seconds;
  o.count = 2;
  o.tag = kTunerTag;
  o.timeout = timeout_;
  HERD_RETURN_IF_ERROR(run_collective([o] { return collectives::AllReduce(o); }));
  const double per_byte = std::max(seconds[1] - seconds[0], 1e-12) / kBigBytes;
  prior_bytes_ = ModelThreshold(model_bytes_, seconds[0], per_byte);
  if (prior_bytes_ > 0) tuner_.SetPrior(prior_bytes_);
  Log().info(
      "dear tuner warm start: tiny all-reduce {:.3f} ms, 1 MiB {:.3f} ms, {} gradient "
      "bytes -> start at {} bytes",
      seconds[0] * 1e3, seconds[1] * 1e3, model_bytes_, tuner_.Next());
  return absl::OkStatus();
}

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
  if (!warm_started_) {
    warm_started_ = true;
    if (settings_.tune_warm_start && model_bytes_ > 0 && comm_ != nullptr && comm_->size() > 1) {
      HERD_RETURN_IF_ERROR(WarmStart(run_collective));
      if (tuner_.Next() != threshold_) {
        threshold_ = tuner_.Next();
        ++boundary_in_trial_;  // this boundary starts the first trial's warm-up
        return std::optional<size_t>(threshold_);
      }
    }
  }
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
  o.tag = kTunerTag;
  o.timeout = timeout_;
  HERD_RETURN_IF_ERROR(run_collective([o] { return collectives::AllReduce(o); }));
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
  // The warm start's outcome shapes the tuner's proposals: it travels with the trials, so the
  // imported tuner proposes what this one would have, without measuring again.
  if (warm_started_) values["fusion/prior"] = absl::StrCat(prior_bytes_);
}

bool FusionTuning::ImportState(const std::string& trials, std::optional<size_t> prior) {
  fusion::FusionTuner tuner(TunerOptionsFrom(settings_));
  if (prior.has_value() && *prior > 0) tuner.SetPrior(*prior);
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
  if (prior.has_value()) {
    warm_started_ = true;
    prior_bytes_ = *prior;
  }
  threshold_ = tuner_.settled() ? tuner_.best() : tuner_.Next();
  boundary_in_trial_ = 0;
  return true;
}

}  // namespace herd::worker
