#pragma once
// Sparse blocks in coordinate form (32-bit indices relative to the block's start, fp32 values)
// and their wire frame. Everything a peer sends is checked before it is used: a frame that
// does not parse, a block with too many entries, or an index out of order or out of range is
// an INVALID_ARGUMENT (ranks called with different counts or densities), never a crash.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/bytes.h"

namespace herd::sparse {

struct CooBlock {
  std::vector<uint32_t> index;  // strictly ascending
  std::vector<float> value;

  size_t size() const { return index.size(); }
  bool empty() const { return index.empty(); }
  void clear() {
    index.clear();
    value.clear();
  }
  void Add(uint32_t i, float v) {
    index.push_back(i);
    value.push_back(v);
  }
};

// Frame of n blocks (n known to both sides): n entry counts (u32), then for each block its
// indices (u32) followed by its values (f32), all native-endian (the ranks of a job share one
// architecture).
size_t FrameBytes(absl::Span<const CooBlock* const> blocks);
size_t MaxFrameBytes(size_t blocks, size_t max_entries);
void EncodeFrame(absl::Span<const CooBlock* const> blocks, std::vector<std::byte>* out);

// Parses a frame of blocks.size() blocks into *blocks[b] (replacing their content). Block b
// must have at most max_entries entries, strictly ascending indices, all below limits[b].
absl::Status DecodeFrame(ConstBytes frame, size_t max_entries, absl::Span<const size_t> limits,
                         absl::Span<CooBlock* const> blocks);

// *out = a + b over the union of their indices (both ascending; so is the result). Where both
// hold an index the sum is a + b, which IEEE addition makes bitwise equal to b + a: the two
// sides of an exchange compute the same block.
void MergeSum(const CooBlock& a, const CooBlock& b, CooBlock* out);

}  // namespace herd::sparse
