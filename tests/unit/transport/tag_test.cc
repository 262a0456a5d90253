#include "transport/tag.h"

#include <gtest/gtest.h>

namespace herd::transport {
namespace {

TEST(TagTest, PackUnpackRoundTrip) {
  Tag t = Tag::Make(OpKind::kAllGather, 12345, 678);
  EXPECT_EQ(Tag::Unpack(t.packed()), t);
  EXPECT_LT(t.packed(), uint64_t{1} << Tag::kBits);  // the top 16 bits are the backends'
}

TEST(TagTest, DistinctFieldsGiveDistinctTags) {
  Tag a = Tag::Make(OpKind::kReduceScatter, 1, 2);
  EXPECT_NE(a.packed(), Tag::Make(OpKind::kAllGather, 1, 2).packed());
  EXPECT_NE(a.packed(), Tag::Make(OpKind::kReduceScatter, 2, 2).packed());
  EXPECT_NE(a.packed(), Tag::Make(OpKind::kReduceScatter, 1, 3).packed());
}

TEST(TagTest, StepWraps) {
  EXPECT_EQ(Tag::Make(OpKind::kUser, 0, Tag::kStepMask + 1).step, 0u);
  EXPECT_EQ(Tag::Make(OpKind::kUser, 7, 1).WithStep(9).step, 9u);
}

TEST(TagTest, ToStringNamesKindIdStep) {
  EXPECT_EQ(Tag::Make(OpKind::kAllReduce, 3, 5).ToString(), "allreduce id=3 step=5");
}

}  // namespace
}  // namespace herd::transport
