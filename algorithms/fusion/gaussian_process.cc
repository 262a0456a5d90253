#include "algorithms/fusion/gaussian_process.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iterator>
#include <limits>
#include <numbers>

namespace herd::fusion {
namespace {

// The hyperparameter grid (normalised units, inputs on [0, 1]). Length scales from a tenth
// of a doubling of the threshold range to the whole range; noise from "exact" to a third of
// the signal. Small on purpose: with at most a few tens of samples a finer search only
// overfits the likelihood.
constexpr double kLengthScales[] = {0.05, 0.1, 0.2, 0.35, 0.6, 1.0};
constexpr double kNoises[] = {1e-6, 1e-3, 1e-2, 0.05, 0.3};
constexpr double kJitter = 1e-10;

// In-place Cholesky of the row-major n x n SPD matrix a (lower triangle). False if not SPD.
bool Cholesky(std::vector<double>& a, size_t n) {
  for (size_t j = 0; j < n; ++j) {
    double d = a[j * n + j];
    for (size_t k = 0; k < j; ++k) d -= a[j * n + k] * a[j * n + k];
    if (!(d > 0.0)) return false;
    d = std::sqrt(d);
    a[j * n + j] = d;
    for (size_t i = j + 1; i < n; ++i) {
      double s = a[i * n + j];
      for (size_t k = 0; k < j; ++k) s -= a[i * n + k] * a[j * n + k];
      a[i * n + j] = s / d;
    }
    for (size_t k = j + 1; k < n; ++k) a[j * n + k] = 0.0;
  }
  return true;
}

// Solves L v = b in place (forward substitution).
void SolveLower(const std::vector<double>& l, size_t n, std::vector<double>& b) {
  for (size_t i = 0; i < n; ++i) {
    double s = b[i];
    for (size_t k = 0; k < i; ++k) s -= l[i * n + k] * b[k];
    b[i] = s / l[i * n + i];
  }
}

// Solves L^T v = b in place (backward substitution).
void SolveUpper(const std::vector<double>& l, size_t n, std::vector<double>& b) {
  for (size_t i = n; i-- > 0;) {
    double s = b[i];
    for (size_t k = i + 1; k < n; ++k) s -= l[k * n + i] * b[k];
    b[i] = s / l[i * n + i];
  }
}

}  // namespace

double Matern52(double r, double length_scale) {
  const double s = std::sqrt(5.0) * std::abs(r) / length_scale;
  return (1.0 + s + s * s / 3.0) * std::exp(-s);
}

void GaussianProcess::Fit(const std::vector<double>& x, const std::vector<double>& y) {
  x_ = x;
  const size_t n = x.size();
  y_mean_ = 0.0;
  for (double v : y) y_mean_ += v;
  if (n > 0) y_mean_ /= static_cast<double>(n);
  double var = 0.0;
  for (double v : y) var += (v - y_mean_) * (v - y_mean_);
  if (n > 1) var /= static_cast<double>(n - 1);
  // A flat sample (all equal) has no scale of its own: take a millionth of its magnitude, so
  // the model calls any difference significant but the expected improvement stays tiny.
  const double floor = 1e-6 * std::max(std::abs(y_mean_), 1e-300);
  y_std_ = var > floor * floor ? std::sqrt(var) : floor;
  y_norm_.resize(n);
  for (size_t i = 0; i < n; ++i) y_norm_[i] = (y[i] - y_mean_) / y_std_;

  double best_lml = -std::numeric_limits<double>::infinity();
  double best_l = kLengthScales[2], best_noise = kNoises[0];
  for (double l : kLengthScales) {
    for (double noise : kNoises) {
      const double lml = FitWith(l, noise);
      if (lml > best_lml) {
        best_lml = lml;
        best_l = l;
        best_noise = noise;
      }
    }
  }
  // Refit with the winner (FitWith leaves the last grid point's factors behind). If every
  // factorisation failed (duplicate inputs with no noise cannot, the noise grid prevents it)
  // the largest noise is the safe fallback.
  if (!std::isfinite(best_lml)) best_noise = kNoises[std::size(kNoises) - 1];
  FitWith(best_l, best_noise);
}

double GaussianProcess::FitWith(double length_scale, double noise) {
  length_scale_ = length_scale;
  noise_ = noise;
  const size_t n = x_.size();
  chol_.assign(n * n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j <= i; ++j) {
      const double k = Matern52(x_[i] - x_[j], length_scale);
      chol_[i * n + j] = k;
      chol_[j * n + i] = k;
    }
    chol_[i * n + i] += noise + kJitter;
  }
  if (!Cholesky(chol_, n)) {
    alpha_.assign(n, 0.0);
    return -std::numeric_limits<double>::infinity();
  }
  alpha_ = y_norm_;
  SolveLower(chol_, n, alpha_);
  // Here alpha_ = L^-1 y: the data-fit term is its squared norm.
  double fit = 0.0;
  for (double v : alpha_) fit += v * v;
  SolveUpper(chol_, n, alpha_);
  double log_det = 0.0;
  for (size_t i = 0; i < n; ++i) log_det += std::log(chol_[i * n + i]);
  return -0.5 * fit - log_det - 0.5 * static_cast<double>(n) * std::log(2.0 * std::numbers::pi);
}

GaussianProcess::Prediction GaussianProcess::Predict(double x) const {
  const size_t n = x_.size();
  std::vector<double> k(n);
  double mean = 0.0;
  for (size_t i = 0; i < n; ++i) {
    k[i] = Matern52(x - x_[i], length_scale_);
    mean += k[i] * alpha_[i];
  }
  SolveLower(chol_, n, k);
  double var = 1.0;
  for (double v : k) var -= v * v;
  // Rounding can push the variance at a sampled point slightly below zero.
  var = std::max(var, 0.0);
  return Prediction{y_mean_ + y_std_ * mean, y_std_ * std::sqrt(var)};
}

}  // namespace herd::fusion
