// UCX communicators in separate processes of this machine (shared memory, loopback TCP): a
// ring exchange of large messages, and a rank killed in the middle of a sequence of exchanges.

#include <signal.h>

#include <chrono>
#include <cstdint>
#include <iostream>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "tests/integration/killed_rank_expectations.h"
#include "tests/integration/process_ranks.h"

namespace herd::transport {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

// What rank `sender` sends at `step`: position- and origin-dependent words.
void FillPattern(std::vector<uint32_t>& v, int sender, uint32_t step) {
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<uint32_t>(i * 2654435761u) ^ (sender * 0x01000193u) ^ (step << 24);
  }
}

// One ring step: send `out` to the right, receive from the left into `in`.
absl::Status RingStep(Communicator& c, uint32_t step, const std::vector<uint32_t>& out,
                      std::vector<uint32_t>& in, Deadline deadline) {
  const int p = c.size();
  Tag tag = Tag::Make(OpKind::kUser, 16, step);
  Request r = c.irecv((c.rank() + p - 1) % p, tag, AsMutableBytes(in.data(), in.size() * 4));
  Request s = c.isend((c.rank() + 1) % p, tag, AsBytes(out.data(), out.size() * 4));
  return c.WaitAll({&r, &s}, deadline);
}

TEST(UcxProcessTest, RingExchangeOf16MiBMessages) {
  herd::testing::ProcessRanksOptions options;
  options.size = 4;
  options.timeout = 60s;
  auto outcomes = herd::testing::RunProcessRanks(
      options, [](Communicator& c, herd::testing::ParentChannel&) -> absl::Status {
        const size_t words = (size_t{16} << 20) / 4;
        const int left = (c.rank() + c.size() - 1) % c.size();
        std::vector<uint32_t> out(words), in(words), expected(words);
        for (uint32_t step = 0; step < 4; ++step) {
          FillPattern(out, c.rank(), step);
          std::fill(in.begin(), in.end(), 0);
          absl::Status st = RingStep(c, step, out, in, Deadline::After(30s));
          if (!st.ok()) return st;
          FillPattern(expected, left, step);
          if (in != expected) {
            return absl::DataLossError(
                absl::StrFormat("step %d: the 16 MiB message from rank %d differs", step, left));
          }
        }
        return absl::OkStatus();
      });
  for (const auto& o : outcomes) {
    EXPECT_TRUE(o.exited && o.exit_code == 0 && o.status.ok()) << o.Describe();
  }
}

constexpr int kVictim = 2;

// Four ranks exchange 16 MiB messages around a ring; rank 2 dies (SIGKILL) with both transfers
// of step 3 in flight. The survivors stamp when their exchange failed.
std::vector<herd::testing::RankOutcome> RunRingWithVictim(
    const herd::testing::ProcessRanksOptions& options) {
  constexpr uint32_t kKillStep = 3;
  return herd::testing::RunProcessRanks(
      options, [](Communicator& c, herd::testing::ParentChannel& parent) -> absl::Status {
        const size_t words = (size_t{16} << 20) / 4;
        std::vector<uint32_t> out(words), in(words);
        for (uint32_t step = 0; step < 20; ++step) {
          FillPattern(out, c.rank(), step);
          if (c.rank() == kVictim && step == kKillStep) {
            const int p = c.size();
            Tag tag = Tag::Make(OpKind::kUser, 16, step);
            Request r = c.irecv((c.rank() + p - 1) % p, tag, AsMutableBytes(in.data(), words * 4));
            Request s = c.isend((c.rank() + 1) % p, tag, AsBytes(out.data(), words * 4));
            (void)c.wait(s, Deadline::After(2ms));
            parent.Stamp("killed_at");
            ::raise(SIGKILL);
          }
          // A deadline far beyond the detection bound the tests check: a survivor that only
          // stops at this deadline fails them.
          absl::Status st = RingStep(c, step, out, in, Deadline::After(20s));
          if (!st.ok()) {
            parent.Stamp("failed_at");
            return st;
          }
        }
        return absl::OkStatus();
      });
}

TEST(UcxProcessTest, KilledRankIsNamedByEverySurvivorWithinSeconds) {
  herd::testing::ProcessRanksOptions options;
  options.timeout = 60s;
  herd::testing::ExpectSurvivorsNameTheVictim(RunRingWithVictim(options), kVictim);
}

TEST(UcxProcessTest, KilledRankOnAnotherHostIsNamedByEverySurvivor) {
  // Endpoints with peer error handling carry the data (the cross-host configuration).
  herd::testing::ProcessRanksOptions options;
  options.timeout = 60s;
  options.separate_hosts = true;
  herd::testing::ExpectSurvivorsNameTheVictim(RunRingWithVictim(options), kVictim);
}

TEST(UcxProcessTest, ZeroCopyModeNeverHangsWhenARankDies) {
  // With same_host_zero_copy UCX 1.13 aborts a survivor whose cross-memory copy with the dead
  // rank fails (see UcxOptions). What must still hold: nobody hangs, and a survivor that lives
  // reports an error naming a rank that died (rank 2, or one UCX aborted right after it).
  herd::testing::ProcessRanksOptions options;
  options.timeout = 60s;
  options.ucx.same_host_zero_copy = true;
  auto outcomes = RunRingWithVictim(options);
  ASSERT_EQ(outcomes[kVictim].signal, SIGKILL) << outcomes[kVictim].Describe();
  std::vector<std::string> dead_names = {"rank 2"};
  for (const auto& o : outcomes) {
    if (o.rank != kVictim && !o.exited) dead_names.push_back(absl::StrFormat("rank %d", o.rank));
  }
  for (const auto& o : outcomes) {
    if (o.rank == kVictim) continue;
    EXPECT_FALSE(o.killed_by_parent) << o.Describe();
    if (!o.exited) {
      EXPECT_EQ(o.signal, SIGABRT) << o.Describe();
      std::cout << absl::StrFormat("rank %d was aborted by UCX\n", o.rank);
      continue;
    }
    EXPECT_EQ(o.exit_code, 1) << o.Describe();
    bool names_a_dead_rank = false;
    for (const std::string& name : dead_names) {
      names_a_dead_rank |= std::string(o.status.message()).find(name) != std::string::npos;
    }
    EXPECT_TRUE(names_a_dead_rank) << o.Describe();
  }
}

}  // namespace
}  // namespace herd::transport
