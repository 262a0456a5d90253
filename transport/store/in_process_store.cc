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

  absl::StatusOr<std::vector<std::string>> GetMany(const std::vector<std::string>& keys,
                                                   Deadline deadline,
                                                   std::vector<size_t>* missing) override {
    std::unique_lock<std::mutex> lock(mu_);
    // Keys are written once and never removed: a key found stays found.
    size_t found = 0;
    auto all_set = [&] {
      while (found < keys.size() && values_.count(keys[found]) > 0) ++found;
      return found == keys.size();
    };
    if (!cv_.wait_until(lock, deadline.at(), all_set)) {
      std::vector<size_t> absent;
      for (size_t i = found; i < keys.size(); ++i) {
        if (values_.count(keys[i]) == 0) absent.push_back(i);
      }
      if (missing != nullptr) *missing = absent;
      return MissingKeysError(keys, absent, "");
    }
    std::vector<std::string> values;
    values.reserve(keys.size());
    for (const std::string& k : keys) values.push_back(values_.at(k));
    return values;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> values_;
};

}  // namespace

std::shared_ptr<Store> MakeInProcessStore() { return std::make_shared<InProcessStore>(); }

}  // namespace herd::transport
