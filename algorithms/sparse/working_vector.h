#pragma once
// The dense working vector of one SparDL call, and the log that lets it give back its input.
//
// SparDL works in the caller's residual buffer. Block by block it becomes x = gradient +
// residual, in the same pass that selects the block's top-k (SelectTopKOfSum): the gradient's
// block is zeroed as it is read, so that every block costs one pass over memory and `data` is
// clear for the result at the end. Pairs received for a block before that pass are added to the
// residual as it is (they join x when the block is materialised).
//
// Selections move entries out of w (zeroing them), received and discarded values are added into
// it; at the end it holds what this rank did not deliver, which is the new residual at the
// indices of the result's support. At every other index the new residual must be x itself, bit
// for bit. Rather than keep a dense copy of x, every change records the x-or-later value it
// overwrote, and a backward replay of the log puts the earliest one, x, back: O(changes) =
// O(P k) work instead of O(count). Internal to algorithms/sparse.

#include <cstddef>
#include <vector>

#include "absl/types/span.h"
#include "algorithms/sparse/coo.h"
#include "algorithms/sparse/schedule.h"
#include "algorithms/sparse/topk.h"

namespace herd::sparse {

class WorkingVector {
 public:
  // `residual` holds the previous residual and `gradient` the gradient, each layout.count
  // elements; both are changed only through this object until the end of the call.
  WorkingVector(float* residual, float* gradient, const BlockLayout& layout)
      : w_(residual), g_(gradient), layout_(layout), ready_(layout.blocks, false) {}

  // Room for this many changes, so that the log grows without copying.
  void Reserve(size_t changes) {
    changed_.reserve(changes);
    before_.reserve(changes);
  }

  // Moves the top-k of block b (materialised first if it is not) into *out, indices relative
  // to the block. scratch: not null.
  void TakeTopK(int b, size_t k, TopkMethod method, CooBlock* out, TopkScratch* scratch);
  // Adds every entry of c, times `scale`, into block b.
  void Add(int b, const CooBlock& c, float scale = 1.0f);

  // The end of a call: every block has been materialised. Puts x back at every changed index
  // outside `keep` (keep[b]: indices within block b that keep what the working vector holds).
  void RestoreOutside(absl::Span<const CooBlock> keep);
  // The end of a failed call: materialises what is not (x everywhere, the gradient zeroed) and
  // puts x back at every changed index.
  void RestoreAll();

 private:
  void Record(size_t i, float x) {
    changed_.push_back(i);
    before_.push_back(x);
  }
  void Replay();

  float* w_;
  float* g_;
  const BlockLayout layout_;
  std::vector<bool> ready_;      // block materialised: w holds x (or later values), g zeros
  std::vector<size_t> changed_;  // every index changed, in order, with the value it had
  std::vector<float> before_;    // (w + g for a block not yet materialised)
};

}  // namespace herd::sparse
