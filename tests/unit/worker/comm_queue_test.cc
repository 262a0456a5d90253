#include "worker/comm_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace herd::worker {
namespace {

using namespace std::chrono_literals;

TEST(CommQueue, RunsOperationsInSubmissionOrder) {
  CommQueue q;
  std::vector<int> order;
  std::vector<CommQueue::Ticket> tickets;
  for (int i = 0; i < 20; ++i) {
    tickets.push_back(q.Submit("op", [&order, i] {
      order.push_back(i);
      return absl::OkStatus();
    }));
  }
  ASSERT_TRUE(q.Drain(Deadline::After(5s)).ok());
  ASSERT_EQ(order.size(), 20u);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(order[i], i);
}

TEST(CommQueue, AFailureNamesTheOperationAndStopsTheRest) {
  CommQueue q;
  std::atomic<bool> ran_after{false};
  auto bad = q.Submit("RS bucket 3", [] { return absl::UnavailableError("rank 2 died"); });
  auto after = q.Submit("AG bucket 3", [&] {
    ran_after = true;
    return absl::OkStatus();
  });
  absl::Status st = q.Wait(after, Deadline::After(5s));
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("RS bucket 3"), std::string::npos) << st;
  EXPECT_NE(st.message().find("rank 2 died"), std::string::npos) << st;
  EXPECT_FALSE(ran_after);
  EXPECT_EQ(q.Wait(bad, Deadline::After(1s)).code(), absl::StatusCode::kUnavailable);
}

TEST(CommQueue, AWaitPastItsDeadlineSaysWhatIsRunning) {
  CommQueue q;
  std::atomic<bool> release{false};
  auto t = q.Submit("AG bucket 0", [&] {
    while (!release) std::this_thread::sleep_for(1ms);
    return absl::OkStatus();
  });
  absl::Status st = q.Wait(t, Deadline::After(50ms));
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(st.message().find("AG bucket 0"), std::string::npos) << st;
  release = true;
  EXPECT_TRUE(q.Wait(t, Deadline::After(5s)).ok());
}

}  // namespace
}  // namespace herd::worker
