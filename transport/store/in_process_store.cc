// A Store in memory, shared by the threads of one process.

#include <condition_variable>
#include <map>
#include <mutex>

#include "absl/strings/str_format.h"
#include "transport/store/store.h"

namespace herd::transport {
namespace {

class InProcessStore final : public Store {
 public:
  absl::Status Set(std::string_view key, std::string_view value) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, inserted] = values_.emplace(std::string(key), std::string(value));
    if (!inserted)
      return absl::AlreadyExistsError(absl::StrFormat("store key '%s' is already set", key));
    cv_.notify_all();
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> Get(std::string_view key, Deadline deadline) override {
    std::unique_lock<std::mutex> lock(mu_);
    const std::string k(key);
    if (!cv_.wait_until(lock, deadline.at(), [&] { return values_.count(k) > 0; })) {
      return absl::DeadlineExceededError(
          absl::StrFormat("store key '%s' did not appear before the deadline", key));
    }
    return values_.at(k);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> values_;
};

}  // namespace

std::shared_ptr<Store> MakeInProcessStore() { return std::make_shared<InProcessStore>(); }

}  // namespace herd::transport
