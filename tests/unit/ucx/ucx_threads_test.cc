// Several threads of one rank using a UCX communicator at once (DeAR runs reduce-scatter and
// all-gather from background threads), and waits that sleep instead of spinning.

#include <sys/resource.h>

#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/unit/ucx/ucx_test_util.h"

namespace herd::transport {
namespace {

using namespace std::chrono_literals;

// CPU time the calling thread used so far.
std::chrono::microseconds ThreadCpuTime() {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  return std::chrono::seconds(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         std::chrono::microseconds(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

TEST(UcxThreadsTest, ConcurrentStreamsOnOneCommunicator) {
  constexpr int kThreads = 3, kMessages = 200;
  auto comms = herd::testing::MakeUcxCommunicators(2);
  ASSERT_EQ(comms.size(), 2u);
  std::vector<absl::Status> results(2 * kThreads);
  std::vector<std::thread> threads;
  // Thread t of each rank streams messages with bucket id t; sizes cross the rendezvous
  // threshold so both protocols interleave.
  for (int rank = 0; rank < 2; ++rank) {
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, rank, t] {
        Communicator& c = *comms[rank];
        std::vector<uint8_t> buf;
        for (int i = 0; i < kMessages; ++i) {
          size_t bytes = (i % 4 == 0) ? (256 << 10) : 64 + i;
          Tag tag = Tag::Make(OpKind::kReduceScatter, t, i);
          Request req;
          if (rank == 0) {
            buf.assign(bytes, static_cast<uint8_t>(i + t));
            req = c.isend(1, tag, AsBytes(buf.data(), bytes));
          } else {
            buf.assign(bytes, 0);
            req = c.irecv(0, tag, AsMutableBytes(buf.data(), bytes));
          }
          absl::Status st = c.wait(req, Deadline::After(20s));
          if (!st.ok()) {
            results[rank * kThreads + t] = st;
            return;
          }
          if (rank == 1 && buf != std::vector<uint8_t>(bytes, static_cast<uint8_t>(i + t))) {
            results[rank * kThreads + t] =
                absl::InternalError(absl::StrCat("bad data, message ", i));
            return;
          }
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < results.size(); ++i)
    EXPECT_TRUE(results[i].ok()) << i << ": " << results[i];
}

TEST(UcxThreadsTest, WaitingSleepsInsteadOfSpinning) {
  auto comms = herd::testing::MakeUcxCommunicators(2);
  ASSERT_EQ(comms.size(), 2u);
  int v = 0;
  Request r = comms[0]->irecv(1, Tag{}, AsMutableBytes(&v, 4));
  auto cpu_before = ThreadCpuTime();
  auto start = Clock::now();
  EXPECT_EQ(comms[0]->wait(r, Deadline::After(500ms)).code(), absl::StatusCode::kDeadlineExceeded);
  auto wall = Clock::now() - start;
  auto cpu = ThreadCpuTime() - cpu_before;
  // A spinning wait would burn about as much CPU as wall time; a sleeping one wakes up about
  // ten times a second.
  EXPECT_LT(cpu, wall / 5) << "cpu " << cpu.count() << " us during a 500 ms wait";
  ASSERT_TRUE(comms[0]->abort(absl::CancelledError("done")).ok());
}

}  // namespace
}  // namespace herd::transport
