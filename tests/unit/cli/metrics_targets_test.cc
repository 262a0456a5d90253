// `herd local`'s metrics ports (cli/local/metrics_targets.h): every process of one job gets its
// own port. Picking each port alone and closing it at once once gave the scheduler and a worker
// the same one, and the worker failed to start.
#include "cli/local/metrics_targets.h"

#include <gtest/gtest.h>

#include <set>

namespace herd::cli {
namespace {

TEST(FreeLoopbackPorts, EveryPortOfOneCallIsDistinctAndNonZero) {
  for (int round = 0; round < 20; ++round) {
    auto ports = FreeLoopbackPorts(64);
    ASSERT_TRUE(ports.ok()) << ports.status();
    ASSERT_EQ(ports->size(), 64u);
    const std::set<int> distinct(ports->begin(), ports->end());
    EXPECT_EQ(distinct.size(), ports->size());
    EXPECT_EQ(distinct.count(0), 0u);
  }
}

TEST(FreeLoopbackPorts, NoneAskedIsAnEmptyList) {
  auto ports = FreeLoopbackPorts(0);
  ASSERT_TRUE(ports.ok());
  EXPECT_TRUE(ports->empty());
}

}  // namespace
}  // namespace herd::cli
