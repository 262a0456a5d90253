#include "common/dtype.h"

#include <gtest/gtest.h>

namespace herd {
namespace {

TEST(DTypeTest, SizesAndNamesRoundTrip) {
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                  DType::kInt32, DType::kInt64, DType::kUInt8}) {
    auto parsed = ParseDType(DTypeName(t));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, t);
    EXPECT_GT(DTypeSize(t), 0u);
  }
  EXPECT_EQ(DTypeSize(DType::kBFloat16), 2u);
  EXPECT_EQ(*ParseDType("float"), DType::kFloat32);
}

TEST(DTypeTest, UnknownNameIsAClearError) {
  auto parsed = ParseDType("complex128");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("complex128"), std::string_view::npos);
}

}  // namespace
}  // namespace herd
