// The cluster emulator (tools/emulator/cluster.h): the cap it sets is the bandwidth ranks get,
// loopback is up in every rank, and nothing is left behind. Needs root and `ip netns`; skips
// with the reason otherwise.

#include "tools/emulator/cluster.h"

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "bench/emu/probe.h"
#include "common/child_processes.h"
#include "tools/emulator/rate.h"

namespace herd::emulator {
namespace {

std::string Namespaces() { return RunCommand({"ip", "netns", "list"}).value_or(""); }

class EmulatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "the cluster emulator needs root; uid " << geteuid();
    if (absl::Status st = Cluster::CheckAvailable(); !st.ok()) {
      GTEST_SKIP() << "network namespaces are not available here: " << st;
    }
  }
};

TEST_F(EmulatorTest, StreamBandwidthFollowsTheCapAndTeardownRemovesEverything) {
  // Two rates a factor 3 apart: a cap that is real moves the measurement with it, a
  // bottleneck elsewhere (CPU, UCX) would not. TCP/IP headers cost about 4.5% at MTU 1500.
  for (uint64_t rate : {uint64_t{1'000'000'000}, uint64_t{300'000'000}}) {
    SCOPED_TRACE(FormatRate(rate));
    std::string prefix;
    {
      auto cluster = Cluster::Create(2, rate);
      ASSERT_TRUE(cluster.ok()) << cluster.status();
      prefix = (*cluster)->Namespace(0);
      prefix.pop_back();  // "herd-emu-<pid>-"
      for (int r = 0; r < 2; ++r) {
        auto lo = RunCommand({"ip", "-n", (*cluster)->Namespace(r), "link", "show", "lo"});
        ASSERT_TRUE(lo.ok()) << lo.status();
        EXPECT_TRUE(absl::StrContains(*lo, "UP")) << *lo;
        auto qdisc =
            RunCommand({"tc", "-n", (*cluster)->Namespace(r), "qdisc", "show", "dev", kRankDevice});
        ASSERT_TRUE(qdisc.ok()) << qdisc.status();
        EXPECT_TRUE(absl::StrContains(*qdisc, "tbf")) << *qdisc;
      }
      ProbeOptions probe;
      probe.probe = "stream";
      probe.bytes = size_t{8} << 20;
      // About 1.3 s of traffic at either rate, long enough that the burst does not count.
      probe.iters = rate >= 1'000'000'000 ? 20 : 6;
      probe.timeout = std::chrono::seconds(60);
      auto result = MeasureInCluster(**cluster, HERD_EMU_EXE, probe);
      ASSERT_TRUE(result.ok()) << result.status();
      const double ratio = result->bits_per_s / static_cast<double>(rate);
      RecordProperty(absl::StrFormat("ratio_%s", FormatRate(rate)), absl::StrFormat("%.3f", ratio));
      EXPECT_GT(ratio, 0.8) << result->bits_per_s / 1e6 << " Mbit/s";
      EXPECT_LT(ratio, 1.05) << result->bits_per_s / 1e6 << " Mbit/s: faster than the cap";
      EXPECT_TRUE(absl::StrContains(Namespaces(), prefix));
    }
    EXPECT_FALSE(absl::StrContains(Namespaces(), prefix)) << Namespaces();
  }
}

TEST_F(EmulatorTest, CleanupRemovesOnlyNamespacesOfDeadProcesses) {
  // A pid that no process has: the largest one the kernel could hand out, if it is free.
  int pid_max = 0;
  std::ifstream("/proc/sys/kernel/pid_max") >> pid_max;
  ASSERT_GT(pid_max, 2);
  int dead = pid_max - 1;
  while (dead > 2 && kill(dead, 0) == 0) --dead;
  const std::string orphan = absl::StrFormat("%s%d-0", kNamespacePrefix, dead);
  const std::string mine = absl::StrFormat("%s%d-cleanup-test", kNamespacePrefix, getpid());
  ASSERT_TRUE(RunCommand({"ip", "netns", "add", orphan}).ok());
  ASSERT_TRUE(RunCommand({"ip", "netns", "add", mine}).ok());

  std::vector<std::string> removed;
  EXPECT_TRUE(Cluster::CleanupLeftovers(/*include_live=*/false, &removed).ok());
  EXPECT_NE(std::find(removed.begin(), removed.end(), orphan), removed.end());
  EXPECT_EQ(std::find(removed.begin(), removed.end(), mine), removed.end());
  const std::string after = Namespaces();
  EXPECT_FALSE(absl::StrContains(after, orphan)) << after;
  EXPECT_TRUE(absl::StrContains(after, mine)) << after;
  EXPECT_TRUE(RunCommand({"ip", "netns", "del", mine}).ok());
}

TEST(EmulatorArgumentsTest, RatesAndSizesAreChecked) {
  EXPECT_EQ(*ParseRate("1gbit"), 1'000'000'000u);
  EXPECT_EQ(*ParseRate("10GBIT"), 10'000'000'000u);
  EXPECT_EQ(*ParseRate("250mbit"), 250'000'000u);
  EXPECT_EQ(*ParseRate("2000000"), 2'000'000u);
  for (const char* bad : {"", "gbit", "1.5gbit", "fast", "999kbit", "500gbit", "-1gbit"}) {
    EXPECT_EQ(ParseRate(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(FormatRate(1'000'000'000), "1gbit");
  EXPECT_EQ(FormatRate(1'500'000), "1500kbit");
  EXPECT_EQ(Cluster::Create(0, 1'000'000'000).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Cluster::Create(2, 1000).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace herd::emulator
