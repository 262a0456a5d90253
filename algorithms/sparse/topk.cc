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

// Collect over x = w + g, storing x into w and zeroing g in the same pass.
void CollectSum(float* w, float* g, uint32_t n, uint32_t threshold, std::vector<uint64_t>* keys) {
  keys->clear();
  for (uint32_t i = 0; i < n; ++i) {
    const float x = w[i] + g[i];
    w[i] = x;
    g[i] = 0;
    const uint32_t a = AbsBits(x);
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

// A deterministic sample of s magnitudes of the n values value_at(pos): s / kRun runs of kRun
// consecutive values, one run in each of s / kRun equal strides, at an offset within the stride
// drawn from a fixed hash (a plain stride would alias with periodic layouts, e.g. one row of a
// weight matrix). A run is about one cache line: reading single values at random would cost a
// cache miss each, and the sample more than the pass over the block.
constexpr size_t kRun = 16;

template <typename ValueAt>
void Sample(size_t n, size_t s, const ValueAt& value_at, std::vector<uint32_t>* sample) {
  const size_t runs = s / kRun, stride = n / runs;  // s <= n / 4: a stride holds 4 runs or more
  sample->resize(runs * kRun);
  for (size_t r = 0; r < runs; ++r) {
    uint64_t h = (r + 1) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
    const size_t start = r * stride + static_cast<size_t>(h % (stride - kRun + 1));
    for (size_t i = 0; i < kRun; ++i) (*sample)[r * kRun + i] = AbsBits(value_at(start + i));
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

namespace {

// The selection over n values. value_at(pos) reads a value without changing anything (for the
// sample); first(threshold, keys) is the first pass over the values, which may also materialise
// them (SelectTopKOfSum); later(threshold, keys) reads the materialised values (the retries of
// kExact). The first pass always runs, whatever k.
template <typename ValueAt, typename FirstPass, typename LaterPass>
void Select(size_t n, size_t k, TopkMethod method, const ValueAt& value_at, const FirstPass& first,
            const LaterPass& later, std::vector<uint32_t>* positions, TopkScratch& s) {
  positions->clear();
  if (n == 0) return;
  if (k == 0) {
    first(0x80000000u, &s.keys);  // above every magnitude: nothing collected
    return;
  }
  // The sample must hold about kSampleRank elements above the threshold, and stay a small
  // part of the input; else the whole input is the candidate set.
  const size_t wanted =
      std::min(n / 4, static_cast<size_t>(std::ceil(double(kSampleRank) * double(n) / double(k))));
  if (k >= n || n < kSmallInput || wanted < 2048) {
    first(1, &s.keys);
    Finish(s.keys, k, &s.work, positions);
    return;
  }

  Sample(n, wanted, value_at, &s.sample);
  const size_t sampled = s.sample.size();  // whole runs: a little below `wanted`
  // Expected number of sampled elements at or above the true k-th magnitude.
  const double expected = double(sampled) * double(k) / double(n);
  if (method == TopkMethod::kSampled) {
    // One standard deviation above the estimate: most often a few more than k candidates pass
    // (trimmed to k), rarely more than a few percent fewer.
    const size_t j = std::clamp<size_t>(
        static_cast<size_t>(std::llround(expected + std::sqrt(expected))), 1, sampled);
    first(SampleThreshold(s.sample, j), &s.keys);
    Finish(s.keys, k, &s.work, positions);
    return;
  }

  // Exact: aim below the estimate by 4 standard deviations of the sample count, so that one
  // pass nearly always collects at least k candidates; lower the threshold until it does (or
  // until every non-zero was collected, the threshold having reached 1).
  size_t j =
      std::min(sampled, static_cast<size_t>(std::ceil(expected + 4 * std::sqrt(expected) + 8)));
  uint32_t threshold = SampleThreshold(s.sample, j);
  first(threshold, &s.keys);
  while (s.keys.size() < k && threshold > 1) {
    if (j == sampled) {  // even the smallest sampled magnitude was too high
      threshold = 1;
    } else {
      j = std::min(sampled, 4 * j);
      threshold = SampleThreshold(s.sample, j);
    }
    later(threshold, &s.keys);
  }
  Finish(s.keys, k, &s.work, positions);
}

}  // namespace

void SelectTopK(absl::Span<const float> x, size_t k, TopkMethod method,
                std::vector<uint32_t>* positions, TopkScratch* scratch) {
  TopkScratch local;
  TopkScratch& s = scratch != nullptr ? *scratch : local;
  auto pass = [&](uint32_t threshold, std::vector<uint64_t>* keys) { Collect(x, threshold, keys); };
  Select(
      x.size(), k, method, [&](size_t p) { return x[p]; }, pass, pass, positions, s);
}

void SelectTopKOfSum(absl::Span<float> w, absl::Span<float> g, size_t k, TopkMethod method,
                     std::vector<uint32_t>* positions, TopkScratch* scratch) {
  TopkScratch local;
  TopkScratch& s = scratch != nullptr ? *scratch : local;
  const uint32_t n = static_cast<uint32_t>(w.size());
  Select(
      w.size(), k, method, [&](size_t p) { return w[p] + g[p]; },
      [&](uint32_t threshold, std::vector<uint64_t>* keys) {
        CollectSum(w.data(), g.data(), n, threshold, keys);
      },
      [&](uint32_t threshold, std::vector<uint64_t>* keys) { Collect(w, threshold, keys); },
      positions, s);
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
