#include "algorithms/fusion/tuner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <random>
#include <utility>

#include "absl/strings/str_format.h"
#include "algorithms/fusion/gaussian_process.h"

namespace herd::fusion {
namespace {

// Candidates of the acquisition: 1024 points evenly spaced in log2(threshold). Over the
// default 1..256 MiB range that is a step of 0.5%, finer than any throughput difference a
// few iterations can measure.
constexpr int kGrid = 1024;
// GP-driven trials required before the early stop may fire: the first fit after the design
// points often has a long length scale and looks falsely certain.
constexpr int kMinGuidedTrials = 2;

// A double in [0, 1) from the generator's bits: std::uniform_real_distribution is not
// specified bit-for-bit across standard libraries, this is.
double Uniform01(std::mt19937_64& gen) { return static_cast<double>(gen() >> 11) * 0x1.0p-53; }

double NormalPdf(double z) { return std::exp(-0.5 * z * z) / std::sqrt(2.0 * std::numbers::pi); }
double NormalCdf(double z) { return 0.5 * std::erfc(-z / std::numbers::sqrt2); }

// Expected improvement of a Gaussian N(mean, stddev^2) over `target` (maximisation).
double ExpectedImprovement(double mean, double stddev, double target) {
  const double gain = mean - target;
  if (stddev <= 1e-12 * std::max(1.0, std::abs(target))) return std::max(gain, 0.0);
  const double z = gain / stddev;
  return gain * NormalCdf(z) + stddev * NormalPdf(z);
}

TunerOptions Repaired(TunerOptions o) {
  o.min_bytes = std::max<size_t>(o.min_bytes, 1);
  o.max_bytes = std::max<size_t>(o.max_bytes, 1);
  if (o.min_bytes > o.max_bytes) std::swap(o.min_bytes, o.max_bytes);
  o.max_trials = std::max(o.max_trials, 1);
  o.initial_random = std::max(o.initial_random, 1);
  if (!(o.exploration >= 0.0) || !std::isfinite(o.exploration)) o.exploration = 0.0;
  if (!(o.stop_improvement >= 0.0) || !std::isfinite(o.stop_improvement)) {
    o.stop_improvement = 0.0;
  }
  return o;
}

}  // namespace

absl::Status ValidateTunerOptions(const TunerOptions& o) {
  if (o.min_bytes < 1 || o.min_bytes > o.max_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "fusion tuner: need 1 <= min_bytes <= max_bytes, got min_bytes %u max_bytes %u",
        o.min_bytes, o.max_bytes));
  }
  if (o.max_trials < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("fusion tuner: max_trials must be >= 1, got %d", o.max_trials));
  }
  if (o.initial_random < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("fusion tuner: initial_random must be >= 1, got %d", o.initial_random));
  }
  if (!(o.exploration >= 0.0) || !std::isfinite(o.exploration)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "fusion tuner: exploration must be finite and >= 0, got %g", o.exploration));
  }
  if (!(o.stop_improvement >= 0.0) || !std::isfinite(o.stop_improvement)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "fusion tuner: stop_improvement must be finite and >= 0, got %g", o.stop_improvement));
  }
  return absl::OkStatus();
}

FusionTuner::FusionTuner(TunerOptions options) : options_(Repaired(options)) {
  Design();
  Propose();
}

void FusionTuner::Design() {
  const int k = options_.initial_random;
  design_.resize(k);
  if (options_.prior_bytes > 0) {
    // The prior first, then points a quarter of the log range below and above it, then halfway
    // between those and the prior: enough to see which side the slope goes without spending a
    // trial at each end of a range that spans ten doublings. A point pushed past an end is
    // mirrored to the other side of the prior.
    const double c = ToUnit(options_.prior_bytes);
    const double offsets[] = {0.0, -0.25, 0.25, -0.125, 0.125};
    for (int j = 0; j < k; ++j) {
      const double d = j < 5 ? offsets[j] : (j % 2 == 0 ? 1.0 : -1.0) * 0.5 / j;
      double u = c + d;
      if (u < 0.0 || u > 1.0) u = c - d;
      design_[j] = std::clamp(u, 0.0, 1.0);
    }
    return;
  }
  // Stratified design: point j lies in stratum perm[j] of [0, 1], so k points always spread
  // over the range (k plain uniform draws may bunch at one end), in a seeded order.
  std::mt19937_64 gen(options_.seed);
  std::vector<int> perm(k);
  for (int j = 0; j < k; ++j) perm[j] = j;
  for (int j = k - 1; j > 0; --j) std::swap(perm[j], perm[gen() % static_cast<uint64_t>(j + 1)]);
  for (int j = 0; j < k; ++j) design_[j] = (perm[j] + Uniform01(gen)) / k;
}

void FusionTuner::SetPrior(size_t prior_bytes) {
  if (!trials_.empty() || settled_) return;
  options_.prior_bytes = prior_bytes;
  Design();
  Propose();
}

double FusionTuner::ToUnit(size_t threshold) const {
  const double lo = std::log2(static_cast<double>(options_.min_bytes));
  const double hi = std::log2(static_cast<double>(options_.max_bytes));
  if (hi <= lo) return 0.0;
  const double t = std::log2(static_cast<double>(std::max<size_t>(threshold, 1)));
  return std::clamp((t - lo) / (hi - lo), 0.0, 1.0);
}

size_t FusionTuner::FromUnit(double u) const {
  const double lo = std::log2(static_cast<double>(options_.min_bytes));
  const double hi = std::log2(static_cast<double>(options_.max_bytes));
  const double v = std::round(std::exp2(lo + std::clamp(u, 0.0, 1.0) * (hi - lo)));
  // Compare in double before converting: max_bytes may be near SIZE_MAX.
  if (v >= static_cast<double>(options_.max_bytes)) return options_.max_bytes;
  if (v <= static_cast<double>(options_.min_bytes)) return options_.min_bytes;
  return static_cast<size_t>(v);
}

void FusionTuner::Report(size_t threshold, double throughput) {
  if (settled_ || !std::isfinite(throughput)) return;
  trials_.push_back(Trial{threshold, throughput});
  Propose();
}

void FusionTuner::Propose() {
  const int n = trials();
  next_ei_ = 0.0;
  if (n == 0) {
    next_ = FromUnit(design_[0]);
    return;
  }

  std::vector<double> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = ToUnit(trials_[i].threshold);
    y[i] = trials_[i].throughput;
  }
  GaussianProcess gp;
  gp.Fit(x, y);

  // The incumbent: the sampled point the model believes best (not the largest raw
  // observation, which under noise is biased upwards).
  double best_mean = -std::numeric_limits<double>::infinity();
  for (int i = 0; i < n; ++i) {
    const double m = gp.Predict(x[i]).mean;
    if (m > best_mean) {
      best_mean = m;
      best_ = trials_[i].threshold;
    }
  }

  if (n >= options_.max_trials || options_.min_bytes == options_.max_bytes) {
    settled_ = true;
    return;
  }
  if (n < options_.initial_random) {
    next_ = FromUnit(design_[n]);
    return;
  }

  // Maximise EI with the exploration margin over the grid; the plain EI (no margin) decides
  // the early stop, so a large margin cannot make the tuner quit sooner.
  const double margin = options_.exploration * gp.y_scale();
  double best_ei = -1.0, max_plain_ei = 0.0;
  double best_u = 0.0;
  for (int i = 0; i < kGrid; ++i) {
    const double u = static_cast<double>(i) / (kGrid - 1);
    const GaussianProcess::Prediction p = gp.Predict(u);
    const double ei = ExpectedImprovement(p.mean, p.stddev, best_mean + margin);
    max_plain_ei = std::max(max_plain_ei, ExpectedImprovement(p.mean, p.stddev, best_mean));
    if (ei > best_ei) {
      best_ei = ei;
      best_u = u;
    }
  }
  next_ = FromUnit(best_u);
  next_ei_ = best_ei;

  const bool guided_enough = n >= options_.initial_random + kMinGuidedTrials;
  if (options_.stop_improvement > 0.0 && guided_enough &&
      max_plain_ei < options_.stop_improvement * std::abs(best_mean)) {
    settled_ = true;
  }
}

}  // namespace herd::fusion
