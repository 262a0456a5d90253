#pragma once
// The density warm-up of the sparse modes (Lin et al., "Deep Gradient Compression", section
// 3.3, "warm-up training"): the first iterations of a sparse stretch deliver 1/4 of each
// bucket, then 1/16, 1/64, ..., each for kDensityWarmupIterations, until the requested density
// is reached. Early in training the gradient changes fastest; a residual that holds most of it
// back for many iterations delays exactly what the model needs first (measured on the CNN,
// 4 workers, 2 epochs at density 0.01: SparDL 0.8121 without, 0.8531 with; docs/sparse.md).

#include <algorithm>
#include <cstdint>

namespace herd::worker {

inline constexpr int64_t kDensityWarmupIterations = 50;

// The density of iteration `iterations_into_stretch` (0 for the stretch's first) when
// `density` was asked for: max(density, 4^-(1 + iterations_into_stretch / 50)).
inline double DensityAt(double density, int64_t iterations_into_stretch) {
  double warm = 0.25;
  for (int64_t stage = iterations_into_stretch / kDensityWarmupIterations;
       stage > 0 && warm > density; --stage) {
    warm *= 0.25;
  }
  return std::max(density, warm);
}

}  // namespace herd::worker
