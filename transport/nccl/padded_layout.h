#pragma once
// herd's chunk layout against NCCL's. herd splits a count-element vector over P ranks so that the
// first count % P chunks have one element more (collectives::ChunkBegin/ChunkSize, re-derived
// here because transport/ may not include algorithms/). ncclReduceScatter and ncclAllGather
// need P equal chunks. When count % P != 0 the NCCL backend goes through a padded buffer of P
// slots of stride = ceil(count / P) elements: chunk c lives at c * stride, with one unused
// element at the end of every short chunk's slot.
//
// The copies between the two layouts are at most two strided blocks (the long chunks, then the
// short ones), so each direction costs two cudaMemcpy2DAsync calls instead of P copies.
// Pure arithmetic on element counts: no CUDA, so it is tested on any machine.

#include <cstddef>
#include <vector>

namespace herd::transport::nccl {

class PaddedLayout {
 public:
  PaddedLayout(size_t count, int parts) : count_(count), parts_(static_cast<size_t>(parts)) {}

  size_t count() const { return count_; }
  // Elements per slot of the padded buffer: the size of the longest chunk.
  size_t stride() const { return (count_ + parts_ - 1) / parts_; }
  size_t padded_count() const { return stride() * parts_; }
  // NCCL can work on the vector in place only when all chunks are equally long.
  bool needs_padding() const { return count_ % parts_ != 0; }

  size_t ChunkBegin(int c) const {
    size_t uc = static_cast<size_t>(c), base = count_ / parts_, extra = count_ % parts_;
    return uc * base + (uc < extra ? uc : extra);
  }
  size_t ChunkSize(int c) const {
    return count_ / parts_ + (static_cast<size_t>(c) < count_ % parts_ ? 1 : 0);
  }

  // `rows` chunks of `width` elements each; row k starts at packed_offset + k * packed_pitch in
  // the vector and at padded_offset + k * padded_pitch in the padded buffer.
  struct Block {
    size_t packed_offset;
    size_t padded_offset;
    size_t width;
    size_t packed_pitch;
    size_t padded_pitch;
    size_t rows;
  };

  // The blocks that together map every chunk between the two layouts (empty ones left out).
  std::vector<Block> Blocks() const {
    std::vector<Block> blocks;
    const size_t s = stride(), extra = count_ % parts_;
    if (extra > 0 && s > 0) blocks.push_back(Block{0, 0, s, s, s, extra});
    // When extra > 0 the short chunks are one element shorter than the slot; otherwise every
    // chunk fills its slot and this block alone covers the vector.
    const size_t short_width = extra > 0 ? s - 1 : s;
    if (parts_ > extra && short_width > 0) {
      blocks.push_back(Block{extra * s, extra * s, short_width, short_width, s, parts_ - extra});
    }
    return blocks;
  }

 private:
  size_t count_;
  size_t parts_;
};

}  // namespace herd::transport::nccl
