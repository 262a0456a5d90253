#include "worker/scheduler_store.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_format.h"
#include "scheduler/limits.h"

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

  absl::StatusOr<std::vector<std::string>> GetMany(const std::vector<std::string>& keys,
                                                   Deadline deadline,
                                                   std::vector<size_t>* missing) override {
    if (keys.size() > scheduler::limits::kMaxStoreGetManyKeys)
      return GetInParts(keys, deadline, missing);
    std::vector<std::string> values(keys.size());
    // Positions still to read: all of them at first, then those an answer listed as missing.
    std::vector<size_t> todo(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) todo[i] = i;
    std::vector<std::string> asked;
    absl::Status last;
    while (!todo.empty()) {
      asked.clear();
      for (size_t i : todo) asked.push_back(keys[i]);
      const auto slice = std::min<std::chrono::nanoseconds>(deadline.remaining(), kPollSlice);
      auto resp = client_->StoreGetMany(job_, asked, Deadline::After(slice), /*partial=*/true);
      if (resp.ok()) {
        if (static_cast<size_t>(resp->values_size()) != asked.size()) {
          return absl::InternalError(
              absl::StrFormat("the scheduler answered %d values for %d store keys of job '%s'",
                              resp->values_size(), asked.size(), job_));
        }
        std::vector<size_t> still;
        size_t next_missing = 0;
        for (size_t j = 0; j < asked.size(); ++j) {
          if (next_missing < static_cast<size_t>(resp->missing_size()) &&
              resp->missing(static_cast<int>(next_missing)) == j) {
            still.push_back(todo[j]);
            ++next_missing;
            continue;
          }
          values[todo[j]] = std::move(*resp->mutable_values(static_cast<int>(j)));
        }
        if (next_missing != static_cast<size_t>(resp->missing_size())) {
          return absl::InternalError(absl::StrFormat(
              "the scheduler's answer for %d store keys of job '%s' lists missing positions "
              "out of order or out of range",
              asked.size(), job_));
        }
        todo = std::move(still);
        last = absl::OkStatus();
      } else {
        const auto code = resp.status().code();
        // A scheduler older than StoreGetMany: key by key, as before it.
        if (code == absl::StatusCode::kUnimplemented) {
          std::vector<size_t> absent;
          auto rest = Store::GetMany(asked, deadline, &absent);
          if (rest.ok()) {
            for (size_t j = 0; j < asked.size(); ++j) values[todo[j]] = std::move((*rest)[j]);
            return values;
          }
          if (!absl::IsDeadlineExceeded(rest.status())) return rest.status();
          std::vector<size_t> still;
          for (size_t j : absent) still.push_back(todo[j]);
          todo = std::move(still);
          last = rest.status();
          break;
        }
        // As in Get: a slice's end and UNAVAILABLE are retried, anything else is final.
        if (code != absl::StatusCode::kDeadlineExceeded && code != absl::StatusCode::kUnavailable) {
          return resp.status();
        }
        last = resp.status();
        if (code == absl::StatusCode::kUnavailable && !deadline.expired()) {
          std::this_thread::sleep_for(
              std::min<std::chrono::nanoseconds>(kRetryPause, deadline.remaining()));
        }
      }
      if (todo.empty() || deadline.expired()) break;
    }
    if (todo.empty()) return values;
    if (missing != nullptr) *missing = todo;
    absl::Status error = transport::MissingKeysError(
        keys, todo, absl::StrFormat("of job '%s' in the scheduler's store", job_));
    if (!last.ok()) {
      error = absl::Status(error.code(),
                           absl::StrFormat("%s (last: %s)", error.message(), last.message()));
    }
    return error;
  }

 private:
  // More keys than one call may name: one GetMany per part, all under the same deadline.
  absl::StatusOr<std::vector<std::string>> GetInParts(const std::vector<std::string>& keys,
                                                      Deadline deadline,
                                                      std::vector<size_t>* missing) {
    constexpr size_t kPart = scheduler::limits::kMaxStoreGetManyKeys;
    std::vector<std::string> values;
    std::vector<size_t> absent;
    values.reserve(keys.size());
    for (size_t begin = 0; begin < keys.size(); begin += kPart) {
      const std::vector<std::string> part(
          keys.begin() + static_cast<std::ptrdiff_t>(begin),
          keys.begin() + static_cast<std::ptrdiff_t>(std::min(keys.size(), begin + kPart)));
      std::vector<size_t> part_missing;
      auto got = GetMany(part, deadline, &part_missing);
      if (got.ok()) {
        for (auto& v : *got) values.push_back(std::move(v));
        continue;
      }
      if (!absl::IsDeadlineExceeded(got.status())) return got.status();
      for (size_t i : part_missing) absent.push_back(begin + i);
      values.resize(std::min(keys.size(), begin + kPart));
    }
    if (absent.empty()) return values;
    if (missing != nullptr) *missing = absent;
    return transport::MissingKeysError(
        keys, absent, absl::StrFormat("of job '%s' in the scheduler's store", job_));
  }

  std::shared_ptr<scheduler::SchedulerClient> client_;
  std::string job_;
};

}  // namespace

std::shared_ptr<transport::Store> MakeSchedulerStore(
    std::shared_ptr<scheduler::SchedulerClient> client, std::string job) {
  return std::make_shared<SchedulerStore>(std::move(client), std::move(job));
}

}  // namespace herd::worker
