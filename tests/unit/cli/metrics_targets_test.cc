// `herd local`'s metrics ports (cli/local/metrics_targets.h): every process of one job gets its
// own port. Picking each port alone and closing it at once once gave the scheduler and a worker
// the same one, and the worker failed to start.
#include "cli/local/metrics_targets.h"

#include <gtest/gtest.h>

#include <fstream>
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

TEST(FreeLoopbackPorts, PortsComeFromBelowTheEphemeralRange) {
  // Outgoing connections take ports of the ephemeral range at any moment; a metrics port picked
  // there could be gone before the child binds it.
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  if (!(in >> low) || low <= 11000) GTEST_SKIP() << "the ephemeral range starts at " << low;
  auto ports = FreeLoopbackPorts(16);
  ASSERT_TRUE(ports.ok()) << ports.status();
  for (int p : *ports) {
    EXPECT_GE(p, 10000);
    EXPECT_LT(p, low);
  }
}

TEST(FreeLoopbackPorts, NoneAskedIsAnEmptyList) {
  auto ports = FreeLoopbackPorts(0);
  ASSERT_TRUE(ports.ok());
  EXPECT_TRUE(ports->empty());
}

}  // namespace
}  // namespace herd::cli
