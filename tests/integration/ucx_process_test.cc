// UCX communicators in separate processes of this machine (shared memory, loopback TCP): a
// ring exchange of large messages, a rank killed in the middle of a sequence of exchanges, and
// a rank outside a peer's bootstrap set (connected on first use) killed before or after it.

#include <signal.h>

#include <chrono>
#include <cstdint>
#include <iostream>
#include <thread>
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

// Six ranks: rank 3 is outside rank 0's bootstrap set (r +- 2^k mod 6 is 1, 2, 4, 5), so the
// two connect only when they first talk. Rank 3 dies (SIGKILL) after exchanging one message
// with rank 0 (`after_first_use`) or right after building its communicator; rank 0 then waits
// for a message from it. The other ranks wait for rank 0's word that it is done.
constexpr int kFar = 3;
std::vector<herd::testing::RankOutcome> RunLazyVictim(herd::testing::ProcessRanksOptions options,
                                                      bool after_first_use) {
  options.size = 6;
  options.timeout = 60s;
  return herd::testing::RunProcessRanks(
      options,
      [after_first_use](Communicator& c, herd::testing::ParentChannel& parent) -> absl::Status {
        const Tag first = Tag::Make(OpKind::kUser, 2, 0), second = Tag::Make(OpKind::kUser, 2, 1);
        const Tag done = Tag::Make(OpKind::kUser, 2, 2);
        int32_t mine = c.rank(), theirs = -1;
        if (c.rank() == kFar) {
          if (after_first_use) {
            Request r = c.irecv(0, first, AsMutableBytes(&theirs, 4));
            Request s = c.isend(0, first, AsBytes(&mine, 4));
            absl::Status st = c.WaitAll({&r, &s}, Deadline::After(20s));
            if (!st.ok()) return st;
          }
          parent.Stamp("killed_at");
          ::raise(SIGKILL);
        }
        if (c.rank() != 0) {
          Request r = c.irecv(0, done, AsMutableBytes(&theirs, 4));
          return c.wait(r, Deadline::After(30s));
        }
        if (after_first_use) {
          Request r = c.irecv(kFar, first, AsMutableBytes(&theirs, 4));
          Request s = c.isend(kFar, first, AsBytes(&mine, 4));
          absl::Status st = c.WaitAll({&r, &s}, Deadline::After(20s));
          if (!st.ok()) return st;
        } else {
          std::this_thread::sleep_for(300ms);  // rank 3 is gone by now
        }
        Request r = c.irecv(kFar, second, AsMutableBytes(&theirs, 4));
        // A deadline far beyond the 4 s the test allows: only a detected death ends it early.
        absl::Status st = c.wait(r, Deadline::After(20s));
        parent.Stamp("failed_at");
        std::vector<Request> told;
        for (int p : {1, 2, 4, 5}) told.push_back(c.isend(p, done, AsBytes(&mine, 4)));
        (void)c.WaitAll(absl::MakeSpan(told), Deadline::After(10s));
        return st.ok() ? absl::InternalError("rank 3's message arrived from a dead rank") : st;
      });
}

void ExpectRankZeroNamesTheLazyVictim(const std::vector<herd::testing::RankOutcome>& outcomes) {
  ASSERT_EQ(outcomes.size(), 6u);
  const auto& dead = outcomes[kFar];
  ASSERT_FALSE(dead.exited) << dead.Describe();
  ASSERT_EQ(dead.signal, SIGKILL) << dead.Describe();
  const auto& zero = outcomes[0];
  EXPECT_TRUE(zero.exited && zero.exit_code == 1) << zero.Describe();
  EXPECT_EQ(zero.status.code(), absl::StatusCode::kUnavailable) << zero.Describe();
  EXPECT_THAT(std::string(zero.status.message()), HasSubstr("rank 3")) << zero.Describe();
  const int64_t took = zero.Stamp("failed_at") - dead.Stamp("killed_at");
  EXPECT_GT(zero.Stamp("failed_at"), 0) << zero.Describe();
  EXPECT_LT(took, int64_t{4'000'000'000}) << zero.Describe();
  std::cout << absl::StrFormat("rank 0 failed %.0f ms after rank 3 died: %s\n", took / 1e6,
                               zero.status.ToString());
  for (int r : {1, 2, 4, 5}) {
    EXPECT_TRUE(outcomes[r].exited && outcomes[r].exit_code == 0) << outcomes[r].Describe();
  }
}

TEST(UcxProcessTest, LazilyConnectedRankKilledLaterIsNamed) {
  ExpectRankZeroNamesTheLazyVictim(RunLazyVictim({}, /*after_first_use=*/true));
}

TEST(UcxProcessTest, RankKilledBeforeItsFirstUseIsNamedWhenFirstUsed) {
  ExpectRankZeroNamesTheLazyVictim(RunLazyVictim({}, /*after_first_use=*/false));
}

TEST(UcxProcessTest, LazilyConnectedRankOnAnotherHostKilledLaterIsNamed) {
  herd::testing::ProcessRanksOptions options;
  options.separate_hosts = true;
  ExpectRankZeroNamesTheLazyVictim(RunLazyVictim(options, /*after_first_use=*/true));
}

TEST(UcxProcessTest, RankOnAnotherHostKilledBeforeItsFirstUseIsNamedWhenFirstUsed) {
  herd::testing::ProcessRanksOptions options;
  options.separate_hosts = true;
  ExpectRankZeroNamesTheLazyVictim(RunLazyVictim(options, /*after_first_use=*/false));
}

}  // namespace
}  // namespace herd::transport
