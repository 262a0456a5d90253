#include "worker/scheduler_store.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_format.h"

namespace herd::worker {
namespace {

// One long poll asks the scheduler to wait at most this long, so an unreachable scheduler is
// noticed (and retried) well before a long deadline.
constexpr auto kPollSlice = std::chrono::seconds(5);
constexpr auto kRetryPause = std::chrono::milliseconds(100);

class SchedulerStore final : public transport::Store {
 public:
  SchedulerStore(std::shared_ptr<scheduler::SchedulerClient> client, std::string job)
      : client_(std::move(client)), job_(std::move(job)) {}

  absl::Status Set(std::string_view key, std::string_view value) override {
    return client_->StoreSet(job_, std::string(key), std::string(value));
  }

  absl::StatusOr<std::string> Get(std::string_view key, Deadline deadline) override {
    const std::string k(key);
    while (true) {
      const auto slice = std::min<std::chrono::nanoseconds>(deadline.remaining(), kPollSlice);
      auto value = client_->StoreGet(job_, k, Deadline::After(slice));
      if (value.ok()) return value;
      const auto code = value.status().code();
      // DEADLINE_EXCEEDED of one slice and UNAVAILABLE (scheduler restarting) are retried
      // until the caller's deadline; anything else (unknown job, bad key, token) is final.
      if (code != absl::StatusCode::kDeadlineExceeded && code != absl::StatusCode::kUnavailable) {
        return value.status();
      }
      if (deadline.expired()) {
        return absl::DeadlineExceededError(absl::StrFormat(
            "store key '%s' of job '%s' did not appear before the deadline (last: %s)", key, job_,
            std::string(value.status().message())));
      }
      if (code == absl::StatusCode::kUnavailable) {
        std::this_thread::sleep_for(
            std::min<std::chrono::nanoseconds>(kRetryPause, deadline.remaining()));
      }
    }
  }

 private:
  std::shared_ptr<scheduler::SchedulerClient> client_;
  std::string job_;
};

}  // namespace

std::shared_ptr<transport::Store> MakeSchedulerStore(
    std::shared_ptr<scheduler::SchedulerClient> client, std::string job) {
  return std::make_shared<SchedulerStore>(std::move(client), std::move(job));
}

}  // namespace herd::worker
