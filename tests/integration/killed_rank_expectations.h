#pragma once
// What every test that SIGKILLs one rank of a process group asserts about the others.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "tests/integration/process_ranks.h"

namespace herd::testing {

// The victim died of SIGKILL after stamping "killed_at"; every survivor exited on its own with
// UNAVAILABLE or DEADLINE_EXCEEDED naming the victim, stamped "failed_at" within 4 s of the
// death, and says how long it took.
inline void ExpectSurvivorsNameTheVictim(const std::vector<RankOutcome>& outcomes, int victim) {
  const RankOutcome& dead = outcomes[victim];
  ASSERT_FALSE(dead.exited) << dead.Describe();
  ASSERT_EQ(dead.signal, SIGKILL) << dead.Describe();
  const int64_t killed_at = dead.Stamp("killed_at");
  ASSERT_GT(killed_at, 0) << dead.Describe();
  const std::string name = absl::StrFormat("rank %d", victim);
  for (const auto& o : outcomes) {
    if (o.rank == victim) continue;
    EXPECT_TRUE(o.exited && !o.killed_by_parent && o.exit_code == 1) << o.Describe();
    EXPECT_THAT(o.status.code(), ::testing::AnyOf(absl::StatusCode::kUnavailable,
                                                  absl::StatusCode::kDeadlineExceeded))
        << o.Describe();
    EXPECT_THAT(std::string(o.status.message()), ::testing::HasSubstr(name)) << o.Describe();
    const int64_t failed_at = o.Stamp("failed_at");
    EXPECT_GT(failed_at, 0) << o.Describe();
    EXPECT_LT(failed_at - killed_at, int64_t{4'000'000'000}) << o.Describe();
    std::cout << absl::StrFormat("rank %d failed %.0f ms after %s died: %s\n", o.rank,
                                 (failed_at - killed_at) / 1e6, name, o.status.ToString());
  }
}

}  // namespace herd::testing
