#pragma once
// The dense working vector of one SparDL call, and the log that lets it give back its input.
//
// SparDL works in the caller's residual buffer, which first receives x = gradient + residual.
// Selections move entries out of it (zeroing them), received and discarded values are added
// into it; at the end it holds what this rank did not deliver, which is the new residual at
// the indices of the result's support. At every other index the new residual must be x itself,
// bit for bit. Rather than keep a second dense copy of x (one more pass over memory per call),
// every change records the value it overwrote, and RestoreOutside replays the log backwards:
// O(changes) = O(P k) work instead of O(count). Internal to algorithms/sparse.

#include <cstddef>
#include <vector>

#include "absl/types/span.h"
#include "algorithms/sparse/coo.h"
#include "algorithms/sparse/topk.h"

namespace herd::sparse {

class WorkingVector {
 public:
  // `w` (count elements) holds x; it is changed only through this object until the end.
  WorkingVector(float* w, size_t count) : w_(w), count_(count) {}

  size_t count() const { return count_; }
  absl::Span<const float> view(size_t begin, size_t length) const {
    return absl::Span<const float>(w_ + begin, length);
  }

  // Moves the top-k of [begin, begin + length) into *out (indices relative to begin).
  // scratch: not null.
  void TakeTopK(size_t begin, size_t length, size_t k, TopkMethod method, CooBlock* out,
                TopkScratch* scratch);
  // Adds every entry of c, times `scale`, at begin + its index.
  void Add(size_t begin, const CooBlock& c, float scale = 1.0f);

  // Puts x back at every changed index outside `keep` (block b of `keep` starting at
  // begins[b]); indices in `keep` keep what the working vector holds.
  void RestoreOutside(absl::Span<const CooBlock> keep, absl::Span<const size_t> begins);

 private:
  void Record(size_t i) {
    changed_.push_back(i);
    before_.push_back(w_[i]);
  }

  float* w_;
  size_t count_;
  std::vector<size_t> changed_;  // every index changed, in order, with the value it had
  std::vector<float> before_;
};

}  // namespace herd::sparse
