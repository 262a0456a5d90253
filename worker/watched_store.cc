#include "worker/watched_store.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace herd::worker {
namespace {

// How often a waiting Get looks at the membership: a stale communicator is given up within
// about this long after the session heard of the change (its heartbeat, timeout / 3).
constexpr std::chrono::milliseconds kSlice{500};

class WatchedStore final : public transport::Store {
 public:
  WatchedStore(std::shared_ptr<transport::Store> inner, std::function<bool()> stale,
               std::string what)
      : inner_(std::move(inner)), stale_(std::move(stale)), what_(std::move(what)) {}

  absl::Status Set(std::string_view key, std::string_view value) override {
    return inner_->Set(key, value);
  }

  absl::StatusOr<std::string> Get(std::string_view key, Deadline deadline) override {
    for (;;) {
      const Deadline slice(std::min(deadline.at(), Clock::now() + kSlice));
      absl::StatusOr<std::string> got = inner_->Get(key, slice);
      if (got.ok() || !absl::IsDeadlineExceeded(got.status())) return got;
      if (stale_()) {
        return absl::UnavailableError(absl::StrFormat(
            "%s: the job's membership changed while waiting for store key '%s'", what_, key));
      }
      if (deadline.expired()) return got;
    }
  }

  absl::StatusOr<std::vector<std::string>> GetMany(const std::vector<std::string>& keys,
                                                   Deadline deadline,
                                                   std::vector<size_t>* missing) override {
    for (;;) {
      const Deadline slice(std::min(deadline.at(), Clock::now() + kSlice));
      absl::StatusOr<std::vector<std::string>> got = inner_->GetMany(keys, slice, missing);
      if (got.ok() || !absl::IsDeadlineExceeded(got.status())) return got;
      if (stale_()) {
        return absl::UnavailableError(
            absl::StrFormat("%s: the job's membership changed while waiting for store keys (%s)",
                            what_, got.status().message()));
      }
      if (deadline.expired()) return got;
    }
  }

 private:
  std::shared_ptr<transport::Store> inner_;
  std::function<bool()> stale_;
  std::string what_;
};

}  // namespace

std::shared_ptr<transport::Store> MakeMembershipWatchedStore(
    std::shared_ptr<transport::Store> inner, std::function<bool()> stale, std::string what) {
  return std::make_shared<WatchedStore>(std::move(inner), std::move(stale), std::move(what));
}

}  // namespace herd::worker
