// Text from files and peers printed to a terminal: control bytes escaped, the rest kept.
#include "common/printable.h"

#include <gtest/gtest.h>

namespace herd {
namespace {

TEST(Printable, EscapesControlBytesAndKeepsTheRest) {
  EXPECT_EQ(Printable("allreduce"), "allreduce");
  EXPECT_EQ(Printable("dear\x1b]0;owned\x07"), "dear\\x1b]0;owned\\x07");
  EXPECT_EQ(Printable(std::string_view("a\0b\r\n\x7f", 6)), "a\\x00b\\x0d\\x0a\\x7f");
  // U+009B (a one-character CSI for terminals that read C1) escaped; U+00E9 kept.
  EXPECT_EQ(Printable("x\xc2\x9b"
                      "2J\xc3\xa9"),
            "x\\xc2\\x9b2J\xc3\xa9");
  EXPECT_EQ(Printable("\xc2"), "\xc2");
}

}  // namespace
}  // namespace herd
