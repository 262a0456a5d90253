// RetryWhileUnavailable: again while UNAVAILABLE, any other answer at once, the last
// UNAVAILABLE once the deadline passed.

#include "common/retry.h"

#include <gtest/gtest.h>

namespace herd {
namespace {

using std::chrono::milliseconds;

TEST(Retry, UnavailableIsTriedAgainUntilAnotherAnswer) {
  int calls = 0;
  absl::StatusOr<int> got = RetryWhileUnavailable(
      [&]() -> absl::StatusOr<int> {
        if (++calls < 3) return absl::UnavailableError("restarting");
        return 42;
      },
      Deadline::After(std::chrono::seconds(10)), milliseconds(1));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, 42);
  EXPECT_EQ(calls, 3);
}

TEST(Retry, ARefusalIsAnsweredAtOnce) {
  int calls = 0;
  absl::Status got = RetryWhileUnavailable(
      [&] {
        ++calls;
        return absl::FailedPreconditionError("no");
      },
      Deadline::After(std::chrono::seconds(10)), milliseconds(1));
  EXPECT_TRUE(absl::IsFailedPrecondition(got)) << got;
  EXPECT_EQ(calls, 1);
}

TEST(Retry, TheLastUnavailableComesBackAtTheDeadline) {
  int calls = 0;
  const auto begin = std::chrono::steady_clock::now();
  absl::Status got = RetryWhileUnavailable(
      [&] { return absl::UnavailableError("attempt " + std::to_string(++calls)); },
      Deadline::After(milliseconds(100)), milliseconds(10));
  const auto took = std::chrono::steady_clock::now() - begin;
  EXPECT_TRUE(absl::IsUnavailable(got)) << got;
  EXPECT_EQ(got.message(), "attempt " + std::to_string(calls));
  EXPECT_GE(calls, 3);
  EXPECT_GE(took, milliseconds(100));
  EXPECT_LT(took, milliseconds(2000));  // the pause never runs past the deadline by much
}

}  // namespace
}  // namespace herd
