#pragma once
// A one-dimensional Gaussian-process regressor, small and dense: the surrogate model of the
// fusion tuner. Inputs are points of [0, 1] (the tuner maps log2(threshold) there), outputs
// any finite reals; the fit normalises them to zero mean and unit variance, so the
// hyperparameters below are in normalised units and one grid serves every objective scale.
//
// Kernel: Matern 5/2 with unit signal variance,
//   k(r) = (1 + sqrt(5) r / l + 5 r^2 / (3 l^2)) exp(-sqrt(5) r / l),
// twice differentiable, the usual choice for BO (Snoek et al.): smooth enough to
// interpolate, rough enough not to overshoot between samples the way the RBF kernel does.
// Observation noise is Gaussian with variance `noise` added to the diagonal. The length
// scale l and the noise are chosen from a small grid by the log marginal likelihood.

#include <vector>

namespace herd::fusion {

class GaussianProcess {
 public:
  struct Prediction {
    double mean;    // posterior mean of the latent function, in the caller's units
    double stddev;  // posterior standard deviation of the latent function (no noise)
  };

  // Fits the observations (x[i], y[i]); x and y have the same size. With no observation the
  // posterior is the prior (mean 0, stddev 1 in normalised units).
  void Fit(const std::vector<double>& x, const std::vector<double>& y);
  Prediction Predict(double x) const;

  double length_scale() const { return length_scale_; }
  double noise() const { return noise_; }
  // The scale of the normalisation: one normalised unit is this many caller units.
  double y_scale() const { return y_std_; }

 private:
  // Log marginal likelihood of the normalised observations under (l, noise); fills chol_ and
  // alpha_ for them. Returns -inf when the Cholesky factorisation fails.
  double FitWith(double length_scale, double noise);

  std::vector<double> x_;
  std::vector<double> y_norm_;
  double y_mean_ = 0.0;
  double y_std_ = 1.0;
  double length_scale_ = 0.2;
  double noise_ = 1e-6;
  std::vector<double> chol_;   // lower-triangular L with L L^T = K + noise I, row-major n x n
  std::vector<double> alpha_;  // (K + noise I)^-1 y_norm
};

// Matern 5/2 correlation at distance r for length scale l.
double Matern52(double r, double length_scale);

}  // namespace herd::fusion
