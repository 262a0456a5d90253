// The size parser of --sizes and the exact size spelling of the tables.

#include "bench/sizes.h"

#include <gtest/gtest.h>

namespace herd::bench {
namespace {

TEST(ParseByteSize, SuffixesArePowersOf1024) {
  EXPECT_EQ(*ParseByteSize("4K"), 4096u);
  EXPECT_EQ(*ParseByteSize("64M"), 64u << 20);
  EXPECT_EQ(*ParseByteSize("1G"), 1u << 30);
  EXPECT_EQ(*ParseByteSize("4000012"), 4000012u);
  EXPECT_EQ(*ParseByteSize("2k"), 2048u);
  EXPECT_EQ(*ParseByteSize("3KiB"), 3072u);
  EXPECT_EQ(*ParseByteSize("5mb"), 5u << 20);
  EXPECT_EQ(*ParseByteSize("7B"), 7u);
  EXPECT_EQ(*ParseByteSize(" 8K "), 8192u);
}

TEST(ParseByteSize, RejectsWhatIsNotASize) {
  for (const char* bad : {"", "K", "-4K", "4Q", "4KK", "1.5M", "0", "0K", "4 K"}) {
    auto s = ParseByteSize(bad);
    EXPECT_FALSE(s.ok()) << "'" << bad << "' parsed as " << *s;
    if (!s.ok()) {
      EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(std::string(s.status().message()).find("bad size"), std::string::npos);
    }
  }
}

TEST(ParseByteSize, RejectsOverflow) {
  EXPECT_FALSE(ParseByteSize("18446744073709551616").ok());  // 2^64
  EXPECT_FALSE(ParseByteSize("17179869184G").ok());          // 2^34 G = 2^64
  EXPECT_TRUE(ParseByteSize("17179869183G").ok());
}

TEST(ParseByteSizeList, KeepsOrderAndDropsDuplicates) {
  auto sizes = ParseByteSizeList("64M,4K,4096,4000012");
  ASSERT_TRUE(sizes.ok());
  EXPECT_EQ(*sizes, (std::vector<size_t>{64u << 20, 4096, 4000012}));
  EXPECT_FALSE(ParseByteSizeList("4K,,8K").ok());
  EXPECT_FALSE(ParseByteSizeList("4K,8X").ok());
}

TEST(DefaultSizes, FourKiBTo256MiBInPowersOfFour) {
  const auto sizes = DefaultSizes();
  ASSERT_EQ(sizes.size(), 9u);
  EXPECT_EQ(sizes.front(), 4096u);
  EXPECT_EQ(sizes.back(), 256u << 20);
  for (size_t i = 1; i < sizes.size(); ++i) EXPECT_EQ(sizes[i], sizes[i - 1] * 4);
}

TEST(FormatByteSize, ShortestExactSpelling) {
  EXPECT_EQ(FormatByteSize(4096), "4K");
  EXPECT_EQ(FormatByteSize(64u << 20), "64M");
  EXPECT_EQ(FormatByteSize(size_t{2} << 30), "2G");
  EXPECT_EQ(FormatByteSize(4000012), "4000012");
  EXPECT_EQ(FormatByteSize(1536), "1536");  // 1.5K has no exact suffix form
  EXPECT_EQ(FormatByteSize(6144), "6K");
  for (size_t s : {size_t{4096}, size_t{3} << 20, size_t{4000012}}) {
    EXPECT_EQ(*ParseByteSize(FormatByteSize(s)), s);
  }
}

}  // namespace
}  // namespace herd::bench
