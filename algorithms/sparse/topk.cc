#include "algorithms/sparse/topk.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace herd::sparse {
namespace {

// For a non-negative float the IEEE bit pattern orders like the value, so magnitudes are
// compared as integers (NaN sorts above infinity: garbage in, but deterministic).
inline uint32_t AbsBits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b & 0x7fffffffu;
}

// Larger key = earlier in the selection order: magnitude first, then the smaller position.
inline uint64_t Key(uint32_t abs_bits, uint32_t pos) { return (uint64_t{abs_bits} << 32) | ~pos; }
inline uint32_t PositionOf(uint64_t key) { return ~static_cast<uint32_t>(key); }

// Keys of every entry with magnitude bits >= threshold (>= 1: zeros never qualify), in
// position order. Branchy on purpose: with thresholds near the top percent the branch is
// almost never taken and predicts well.
void Collect(absl::Span<const float> x, uint32_t threshold, std::vector<uint64_t>* keys) {
  keys->clear();
  const float* p = x.data();
  const uint32_t n = static_cast<uint32_t>(x.size());
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t a = AbsBits(p[i]);
    if (a >= threshold) keys->push_back(Key(a, i));
  }
}

// The positions of the best min(k, keys.size()) keys, ascending. `keys` is in position order,
// so keeping the keys at or above the k-th best (all distinct) preserves that order.
void Finish(const std::vector<uint64_t>& keys, size_t k, std::vector<uint64_t>* work,
            std::vector<uint32_t>* positions) {
  positions->clear();
  if (keys.size() <= k) {
    positions->reserve(keys.size());
    for (uint64_t key : keys) positions->push_back(PositionOf(key));
    return;
  }
  work->assign(keys.begin(), keys.end());
  std::nth_element(work->begin(), work->begin() + (k - 1), work->end(), std::greater<uint64_t>());
  const uint64_t kth = (*work)[k - 1];
  positions->reserve(k);
  for (uint64_t key : keys) {
    if (key >= kth) positions->push_back(PositionOf(key));
  }
}

// A deterministic sample of s magnitudes: one element from each of s equal strides, at an
// offset within the stride drawn from a fixed hash (a plain stride would alias with periodic
// layouts, e.g. one row of a weight matrix).
void Sample(absl::Span<const float> x, size_t s, std::vector<uint32_t>* sample) {
  const size_t n = x.size(), stride = n / s;
  sample->resize(s);
  for (size_t i = 0; i < s; ++i) {
    uint64_t h = (i + 1) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
    const size_t pos = std::min(n - 1, i * n / s + static_cast<size_t>(h % stride));
    (*sample)[i] = AbsBits(x[pos]);
  }
}

// The j-th largest sampled magnitude (1-based), at least 1 so that zeros never qualify.
uint32_t SampleThreshold(std::vector<uint32_t>& sample, size_t j) {
  std::nth_element(sample.begin(), sample.begin() + (j - 1), sample.end(),
                   std::greater<uint32_t>());
  return std::max<uint32_t>(sample[j - 1], 1);
}

}  // namespace

std::string_view TopkMethodName(TopkMethod m) {
  return m == TopkMethod::kSampled ? "sampled" : "exact";
}

absl::StatusOr<TopkMethod> ParseTopkMethod(std::string_view name) {
  std::string n = absl::AsciiStrToLower(std::string(name));
  if (n == "exact") return TopkMethod::kExact;
  if (n == "sampled") return TopkMethod::kSampled;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown top-k method '", std::string(name), "'; expected exact or sampled"));
}

void SelectTopK(absl::Span<const float> x, size_t k, TopkMethod method,
                std::vector<uint32_t>* positions, TopkScratch* scratch) {
  TopkScratch local;
  TopkScratch& s = scratch != nullptr ? *scratch : local;
  const size_t n = x.size();
  positions->clear();
  if (k == 0 || n == 0) return;

  // The sample must hold about kSampleRank elements above the threshold, and stay a small
  // part of the input (it is read at random); else the whole input is the candidate set.
  const size_t sample_size =
      std::min(n / 4, static_cast<size_t>(std::ceil(double(kSampleRank) * double(n) / double(k))));
  if (k >= n || n < kSmallInput || sample_size < 2048) {
    Collect(x, 1, &s.keys);
    Finish(s.keys, k, &s.work, positions);
    return;
  }

  Sample(x, sample_size, &s.sample);
  // Expected number of sampled elements at or above the true k-th magnitude.
  const double expected = double(sample_size) * double(k) / double(n);
  if (method == TopkMethod::kSampled) {
    // One standard deviation above the estimate: most often a few more than k candidates pass
    // (trimmed to k), rarely more than a few percent fewer.
    const size_t j = std::clamp<size_t>(
        static_cast<size_t>(std::llround(expected + std::sqrt(expected))), 1, sample_size);
    Collect(x, SampleThreshold(s.sample, j), &s.keys);
    Finish(s.keys, k, &s.work, positions);
    return;
  }

  // Exact: aim below the estimate by 4 standard deviations of the sample count, so that one
  // pass nearly always collects at least k candidates; lower the threshold until it does (or
  // until every non-zero was collected, the threshold having reached 1).
  size_t j =
      std::min(sample_size, static_cast<size_t>(std::ceil(expected + 4 * std::sqrt(expected) + 8)));
  for (;;) {
    const uint32_t threshold = SampleThreshold(s.sample, j);
    Collect(x, threshold, &s.keys);
    if (s.keys.size() >= k || threshold == 1) break;
    if (j == sample_size) {  // even the smallest sampled magnitude was too high
      Collect(x, 1, &s.keys);
      break;
    }
    j = std::min(sample_size, 4 * j);
  }
  Finish(s.keys, k, &s.work, positions);
}

void MoveTopK(absl::Span<float> block, size_t k, TopkMethod method, CooBlock* out,
              TopkScratch* scratch) {
  TopkScratch local;
  TopkScratch& s = scratch != nullptr ? *scratch : local;
  SelectTopK(block, k, method, &s.positions, &s);
  out->clear();
  out->index.reserve(s.positions.size());
  out->value.reserve(s.positions.size());
  for (uint32_t p : s.positions) {
    out->Add(p, block[p]);
    block[p] = 0;
  }
}

void SplitTopK(const CooBlock& in, size_t k, TopkMethod method, CooBlock* kept, CooBlock* dropped,
               TopkScratch* scratch) {
  TopkScratch local;
  TopkScratch& s = scratch != nullptr ? *scratch : local;
  // Positions in `in` ascend with its indices, so ties resolve to the smaller index.
  SelectTopK(in.value, k, method, &s.positions, &s);
  kept->clear();
  dropped->clear();
  size_t next = 0;
  const std::vector<uint32_t>& sel = s.positions;
  for (size_t p = 0; p < in.size(); ++p) {
    if (next < sel.size() && sel[next] == p) {
      kept->Add(in.index[p], in.value[p]);
      ++next;
    } else {
      dropped->Add(in.index[p], in.value[p]);
    }
  }
}

}  // namespace herd::sparse
