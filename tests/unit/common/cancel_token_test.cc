// CancelToken (common/cancel_token.h): cancellers run once, with the first reason; a call
// registered after the cancel is cancelled at once; an unregistered call is left alone.

#include "common/cancel_token.h"

#include <gtest/gtest.h>

namespace herd {
namespace {

TEST(CancelToken, CancelsRegisteredAndLaterCallsWithTheFirstReason) {
  CancelToken token;
  int a = 0, b = 0, late = 0;
  EXPECT_TRUE(token.reason().ok());
  {
    CancelRegistration ra(&token, [&] { ++a; });
    CancelRegistration rb(&token, [&] { ++b; });
    {
      CancelRegistration gone(&token, [&] { ADD_FAILURE() << "unregistered before the cancel"; });
    }
    token.Cancel(absl::AbortedError("job 'j' failed: worker 'w1' (rank 1) declared dead"));
    token.Cancel(absl::CancelledError("a second reason is ignored"));
  }
  EXPECT_EQ(a, 1);
  EXPECT_EQ(b, 1);
  EXPECT_EQ(token.reason().code(), absl::StatusCode::kAborted);
  EXPECT_NE(std::string(token.reason().message()).find("'w1'"), std::string::npos);
  CancelRegistration after(&token, [&] { ++late; });
  EXPECT_EQ(late, 1) << "a call registered after the cancel is cancelled at once";
  CancelRegistration none(nullptr, [] { ADD_FAILURE() << "no token, no cancel"; });
}

}  // namespace
}  // namespace herd
