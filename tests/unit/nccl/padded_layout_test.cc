// The padded layout that maps herd's chunks onto NCCL's equal slices. Pure arithmetic: runs on
// every machine, GPU or not.

#include "transport/nccl/padded_layout.h"

#include <vector>

#include <gtest/gtest.h>

#include "algorithms/collectives/options.h"

namespace herd::transport::nccl {
namespace {

// Applies the blocks as a copy would: where does each packed element land in the padded buffer
// (-1: nowhere).
std::vector<long> Map(const PaddedLayout& layout) {
  std::vector<long> where(layout.count(), -1);
  for (const PaddedLayout::Block& b : layout.Blocks()) {
    EXPECT_LE(b.width, b.packed_pitch);  // cudaMemcpy2D needs width <= pitch
    EXPECT_LE(b.width, b.padded_pitch);
    for (size_t row = 0; row < b.rows; ++row) {
      for (size_t k = 0; k < b.width; ++k) {
        size_t from = b.packed_offset + row * b.packed_pitch + k;
        size_t to = b.padded_offset + row * b.padded_pitch + k;
        EXPECT_LT(from, layout.count());
        EXPECT_LT(to, layout.padded_count());
        if (from >= layout.count()) continue;
        EXPECT_EQ(where[from], -1) << "element " << from << " copied twice";
        where[from] = static_cast<long>(to);
      }
    }
  }
  return where;
}

TEST(PaddedLayoutTest, ChunksMatchTheCollectivesLayout) {
  for (size_t count : {size_t{0}, size_t{1}, size_t{5}, size_t{64}, size_t{1000003}}) {
    for (int p = 1; p <= 9; ++p) {
      PaddedLayout layout(count, p);
      for (int c = 0; c <= p; ++c) {
        EXPECT_EQ(layout.ChunkBegin(c), collectives::ChunkBegin(count, p, c)) << count << "/" << p;
        if (c < p) {
          EXPECT_EQ(layout.ChunkSize(c), collectives::ChunkSize(count, p, c));
        }
      }
      EXPECT_EQ(layout.ChunkBegin(p), count);
    }
  }
}

TEST(PaddedLayoutTest, EveryElementLandsAtItsChunkSlot) {
  for (size_t count = 0; count <= 60; ++count) {
    for (int p = 1; p <= 9; ++p) {
      SCOPED_TRACE(::testing::Message() << "count " << count << ", P " << p);
      PaddedLayout layout(count, p);
      const size_t stride = (count + p - 1) / p;
      EXPECT_EQ(layout.stride(), stride);
      EXPECT_EQ(layout.padded_count(), stride * p);
      EXPECT_EQ(layout.needs_padding(), count % p != 0);
      EXPECT_LE(layout.Blocks().size(), 2u);
      std::vector<long> where = Map(layout);
      for (int c = 0; c < p; ++c) {
        for (size_t k = 0; k < layout.ChunkSize(c); ++k) {
          size_t i = layout.ChunkBegin(c) + k;
          EXPECT_EQ(where[i], static_cast<long>(c * stride + k)) << "chunk " << c;
        }
      }
    }
  }
}

TEST(PaddedLayoutTest, LargeVectorNeedsTwoBlocks) {
  // 1000003 over 4 ranks: 3 chunks of 250001 and one of 250000.
  PaddedLayout layout(1000003, 4);
  ASSERT_TRUE(layout.needs_padding());
  EXPECT_EQ(layout.stride(), 250001u);
  auto blocks = layout.Blocks();
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[0].rows, 3u);
  EXPECT_EQ(blocks[0].width, 250001u);
  EXPECT_EQ(blocks[1].rows, 1u);
  EXPECT_EQ(blocks[1].width, 250000u);
  EXPECT_EQ(blocks[1].packed_offset, 750003u);
  EXPECT_EQ(blocks[1].padded_offset, 750003u);
}

TEST(PaddedLayoutTest, FewerElementsThanRanksLeavesEmptyChunksOut) {
  // 2 elements over 5 ranks: chunks 0 and 1 hold one each, chunks 2..4 are empty.
  PaddedLayout layout(2, 5);
  EXPECT_EQ(layout.stride(), 1u);
  auto blocks = layout.Blocks();
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0].rows, 2u);
  EXPECT_EQ(blocks[0].width, 1u);
}

}  // namespace
}  // namespace herd::transport::nccl
