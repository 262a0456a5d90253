// The sparse wire frame: round trips, and every malformed frame a peer could send refused
// with INVALID_ARGUMENT.

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "algorithms/sparse/coo.h"

namespace herd::sparse {
namespace {

CooBlock Block(std::vector<uint32_t> index, std::vector<float> value) {
  CooBlock b;
  b.index = std::move(index);
  b.value = std::move(value);
  return b;
}

TEST(CooFrameTest, RoundTrip) {
  const CooBlock a = Block({1, 5, 9}, {1.5f, -2, 3}), empty, c = Block({0}, {7});
  const CooBlock* blocks[] = {&a, &empty, &c};
  std::vector<std::byte> frame;
  EncodeFrame(blocks, &frame);
  EXPECT_EQ(frame.size(), FrameBytes(blocks));
  EXPECT_EQ(frame.size(), 3 * 4 + 4 * 8u);
  EXPECT_LE(frame.size(), MaxFrameBytes(3, 3));
  CooBlock x, y, z;
  CooBlock* out[] = {&x, &y, &z};
  const size_t limits[] = {10, 1, 1};
  ASSERT_TRUE(DecodeFrame(ConstBytes(frame.data(), frame.size()), 3, limits, out).ok());
  EXPECT_EQ(x.index, a.index);
  EXPECT_EQ(x.value, a.value);
  EXPECT_TRUE(y.empty());
  EXPECT_EQ(z.index, c.index);
}

TEST(CooFrameTest, RefusesMalformedFrames) {
  const CooBlock a = Block({1, 5, 9}, {1, 2, 3});
  const CooBlock* blocks[] = {&a};
  std::vector<std::byte> frame;
  EncodeFrame(blocks, &frame);
  CooBlock x;
  CooBlock* out[] = {&x};
  const size_t limit[] = {10}, short_limit[] = {9};
  auto decode = [&](const std::vector<std::byte>& f, size_t max_entries, const size_t* lim) {
    return DecodeFrame(ConstBytes(f.data(), f.size()), max_entries, absl::MakeSpan(lim, 1), out);
  };
  EXPECT_TRUE(decode(frame, 3, limit).ok());
  EXPECT_EQ(decode(frame, 2, limit).code(), absl::StatusCode::kInvalidArgument);        // too many
  EXPECT_EQ(decode(frame, 3, short_limit).code(), absl::StatusCode::kInvalidArgument);  // range
  std::vector<std::byte> truncated(frame.begin(), frame.end() - 1);
  EXPECT_EQ(decode(truncated, 3, limit).code(), absl::StatusCode::kInvalidArgument);
  std::vector<std::byte> header_only(frame.begin(), frame.begin() + 2);
  EXPECT_EQ(decode(header_only, 3, limit).code(), absl::StatusCode::kInvalidArgument);
  std::vector<std::byte> unordered = frame;  // swap indices 5 and 9
  const uint32_t nine = 9, five = 5;
  std::memcpy(unordered.data() + 4 + 4, &nine, 4);
  std::memcpy(unordered.data() + 4 + 8, &five, 4);
  EXPECT_EQ(decode(unordered, 3, limit).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CooFrameTest, MergeSumIsSymmetric) {
  const CooBlock a = Block({1, 4, 6}, {0.1f, 0.2f, 0.3f}), b = Block({0, 4, 7}, {1, 0.7f, -1});
  CooBlock ab, ba;
  MergeSum(a, b, &ab);
  MergeSum(b, a, &ba);
  EXPECT_EQ(ab.index, (std::vector<uint32_t>{0, 1, 4, 6, 7}));
  EXPECT_EQ(ab.index, ba.index);
  EXPECT_EQ(ab.value, ba.value);
  EXPECT_EQ(ab.value[2], 0.2f + 0.7f);
}

}  // namespace
}  // namespace herd::sparse
