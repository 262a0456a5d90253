#pragma once
// Top-k selection by magnitude, in linear time (no sort of the input).
//
// Order: |x| descending, ties broken by the smaller position. It is a total order, so the
// selected set depends only on the values and k, never on the method's internals: two ranks
// holding the same values select the same entries (R-SAG and B-SAG rely on it). Zeros are never
// selected: a block with fewer than k non-zeros yields all of them.
//
// How: a deterministic sample of |x| gives a threshold t; one pass over x collects the
// candidates with |x| >= t as 64-bit keys (|x| bits above, the inverted position below, so that
// the key order is the order above); nth_element over the candidates (about k of them, not n)
// finds the k-th key, and a pass over the candidates, which are in position order, keeps those
// at or above it. Inputs below kSmallInput skip the sample.
//
//  kExact:   the sample's threshold sits a safety margin (4 standard deviations) below the
//            estimated k-th magnitude; if fewer than k candidates still pass it, the threshold
//            is lowered and the pass repeated. Returns exactly min(k, non-zeros of x) entries.
//  kSampled: the threshold sits one standard deviation below the estimate; one pass, no
//            retry. Returns at most k entries (the largest ones), about k: on smooth inputs
//            most often exactly k, else a few percent fewer; fewer on inputs with many equal
//            magnitudes at the threshold.

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "algorithms/sparse/coo.h"

namespace herd::sparse {

enum class TopkMethod : uint8_t { kExact = 0, kSampled = 1 };
std::string_view TopkMethodName(TopkMethod m);  // "exact", "sampled"
absl::StatusOr<TopkMethod> ParseTopkMethod(std::string_view name);

// Memory SelectTopK keeps between calls, so that a loop over blocks allocates once.
struct TopkScratch {
  std::vector<uint32_t> sample;
  std::vector<uint64_t> keys;
  std::vector<uint64_t> work;
  std::vector<uint32_t> positions;  // for the callers' selections
};

// Below this many elements the whole input is the candidate set (no sample).
inline constexpr size_t kSmallInput = 16384;
// The sample is sized so that about this many sampled elements lie above the k-th magnitude.
inline constexpr size_t kSampleRank = 512;

// Writes to *positions (replacing its content) the positions of the selected entries of x, in
// ascending order. x.size() must be below 2^32 (positions are 32-bit).
void SelectTopK(absl::Span<const float> x, size_t k, TopkMethod method,
                std::vector<uint32_t>* positions, TopkScratch* scratch);

// SelectTopK over x = w + g (element-wise, one fp32 addition each) fused with materialising
// it: in the same pass over memory w becomes x and g becomes zeros. w and g have the same size.
void SelectTopKOfSum(absl::Span<float> w, absl::Span<float> g, size_t k, TopkMethod method,
                     std::vector<uint32_t>* positions, TopkScratch* scratch);

// Splits the sparse `in` into its selected entries (*kept) and the others (*dropped), both in
// ascending index order. The order between equal magnitudes is the smaller index first.
void SplitTopK(const CooBlock& in, size_t k, TopkMethod method, CooBlock* kept, CooBlock* dropped,
               TopkScratch* scratch);

}  // namespace herd::sparse
