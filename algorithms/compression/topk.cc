// Top-k as a compressor: the k values of largest magnitude travel exactly, with their indices;
// the rest decode to 0. Every dropped value is no larger in magnitude than the smallest kept
// one, so ||x - D(Q(x))||^2 <= (1 - k / n) ||x||^2. The selection is a total order (magnitude
// descending, then index ascending), so the kept set does not depend on the sort's whims.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "absl/strings/str_format.h"
#include "algorithms/compression/codecs.h"

namespace herd::compression::internal {

size_t TopKCount(size_t count, double density) {
  if (count == 0) return 0;
  // Rounded, not ceiled: ceil(0.07 * 100) would be 8 (0.07 * 100 = 7.000000000000001).
  const double k = std::round(density * static_cast<double>(count));
  return k < 1.0 ? 1 : std::min(count, static_cast<size_t>(k));
}

size_t TopKBytes(size_t count, double density) {
  return TopKCount(count, density) * (sizeof(uint32_t) + sizeof(float));
}

void TopKEncode(std::span<const float> in, double density, uint8_t* out) {
  const size_t n = in.size(), k = TopKCount(n, density);
  std::vector<uint32_t> idx(n);
  std::iota(idx.begin(), idx.end(), uint32_t{0});
  if (k < n) {
    auto larger = [&](uint32_t a, uint32_t b) {
      const float ma = std::fabs(Finite(in[a])), mb = std::fabs(Finite(in[b]));
      return ma > mb || (ma == mb && a < b);
    };
    std::nth_element(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(), larger);
    std::sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k));
  }
  // An empty tensor keeps nothing; memcpy must not see the empty vector's null data().
  if (k == 0) return;
  std::memcpy(out, idx.data(), k * sizeof(uint32_t));
  float* values = reinterpret_cast<float*>(out + k * sizeof(uint32_t));
  for (size_t j = 0; j < k; ++j) {
    const float v = Finite(in[idx[j]]);
    std::memcpy(values + j, &v, sizeof v);
  }
}

absl::Status TopKDecode(const uint8_t* in, double density, std::span<float> out, bool add) {
  const size_t n = out.size(), k = TopKCount(n, density);
  if (k == 0) return absl::OkStatus();  // an empty tensor (and memcpy must not see null)
  std::vector<uint32_t> idx(k);
  std::vector<float> values(k);
  std::memcpy(idx.data(), in, k * sizeof(uint32_t));
  std::memcpy(values.data(), in + k * sizeof(uint32_t), k * sizeof(float));
  // Check everything first so that a bad payload leaves `out` untouched.
  for (size_t j = 0; j < k; ++j) {
    if (idx[j] >= n || (j > 0 && idx[j] <= idx[j - 1])) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "top-k payload: index %d at position %d is out of order or beyond the %d values", idx[j],
          j, n));
    }
    if (!std::isfinite(values[j])) {
      return absl::InvalidArgumentError(
          absl::StrFormat("top-k payload: value %g at index %d is not finite", values[j], idx[j]));
    }
  }
  if (!add) std::fill(out.begin(), out.end(), 0.0f);
  for (size_t j = 0; j < k; ++j) out[idx[j]] += values[j];
  return absl::OkStatus();
}

}  // namespace herd::compression::internal
