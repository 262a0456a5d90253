// The rollback log of an elastic worker (worker/rollback_log.h): two commits, four data
// positions, the newer commits dropped by a rollback.
#include "worker/rollback_log.h"

#include <gtest/gtest.h>

namespace herd::worker {
namespace {

checkpoint::ProcessState StateNamed(const std::string& tag) {
  checkpoint::ProcessState s;
  s.process = "worker-0";
  s.values["tag"] = tag;
  return s;
}

TEST(RollbackLog, KeepsTheTwoNewestCommits) {
  RollbackLog log;
  EXPECT_TRUE(log.empty());
  EXPECT_FALSE(log.Newest(-1));
  log.Keep(-1, StateNamed("start"), 0.002);
  log.Keep(0, StateNamed("after 0"), 0.004);
  log.Keep(1, StateNamed("after 1"), 0.006);
  EXPECT_EQ(log.Held(), (std::vector<int64_t>{0, 1}));
  EXPECT_TRUE(log.Newest(1));
  EXPECT_FALSE(log.Newest(0));
  EXPECT_EQ(log.Find(-1), nullptr);
  ASSERT_NE(log.Find(0), nullptr);
  EXPECT_EQ(log.Find(0)->state.values.at("tag"), "after 0");
  EXPECT_EQ(log.commits_taken(), 3);
  EXPECT_NEAR(log.mean_commit_ms(), 4.0, 1e-9);
}

TEST(RollbackLog, ARollbackDropsTheNewerCommitsWhichRunAgain) {
  RollbackLog log;
  log.Keep(6, StateNamed("after 6"), 0);
  log.Keep(7, StateNamed("after 7"), 0);
  log.DropAfter(6);
  EXPECT_EQ(log.Held(), (std::vector<int64_t>{6}));
  EXPECT_TRUE(log.Newest(6));
  log.Keep(7, StateNamed("after 7 again"), 0);
  EXPECT_EQ(log.Find(7)->state.values.at("tag"), "after 7 again");
  log.DropAfter(7);  // nothing newer: nothing goes
  EXPECT_EQ(log.Held(), (std::vector<int64_t>{6, 7}));
}

TEST(RollbackLog, KeepsTheFourNewestDataPositions) {
  RollbackLog log;
  EXPECT_FALSE(log.PositionOf(0).has_value());
  EXPECT_EQ(log.mean_commit_ms(), 0);
  for (int64_t i = 0; i < 6; ++i) log.NotePosition(i, DataPosition{1, 32 * i});
  EXPECT_FALSE(log.PositionOf(1).has_value());
  ASSERT_TRUE(log.PositionOf(2).has_value());
  EXPECT_EQ(log.PositionOf(5)->offset, 160);
  log.NotePosition(5, DataPosition{2, 0});  // noted again: the newer position holds
  EXPECT_EQ(log.PositionOf(5)->epoch, 2);
  EXPECT_TRUE(log.PositionOf(2).has_value());
}

}  // namespace
}  // namespace herd::worker
