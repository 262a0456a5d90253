#pragma once
// A one-shot "stop waiting" signal shared between whoever learns that work is pointless (the
// worker's session, when the scheduler says the job ended) and the calls blocked on it (a
// parameter-server call waiting for a round a dead worker will never complete). Each call
// registers how to cancel itself; Cancel runs every registered canceller once, and every call
// registered later is cancelled at once. Thread-safe.

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

#include "absl/status/status.h"

namespace herd {

class CancelToken {
 public:
  using Id = uint64_t;

  // Registers `cancel` (it must be safe to call from another thread while the call runs, like
  // grpc::ClientContext::TryCancel). Runs it at once when the token is already cancelled.
  Id Register(std::function<void()> cancel) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!reason_.ok()) {
      lock.unlock();
      cancel();
      return 0;
    }
    const Id id = ++next_;
    cancellers_.emplace(id, std::move(cancel));
    return id;
  }
  // Unregisters before the call's state goes away (0 is a no-op).
  void Unregister(Id id) {
    std::lock_guard<std::mutex> lock(mu_);
    cancellers_.erase(id);
  }
  // The first reason wins; `why` must not be OK.
  void Cancel(absl::Status why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!reason_.ok() || why.ok()) return;
    reason_ = std::move(why);
    // Under the lock, so an Unregister (and the call's state) waits until its canceller ran.
    for (auto& [id, cancel] : cancellers_) cancel();
    cancellers_.clear();
  }
  // OK until cancelled; then the reason given.
  absl::Status reason() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reason_;
  }

 private:
  mutable std::mutex mu_;
  absl::Status reason_;
  std::map<Id, std::function<void()>> cancellers_;
  Id next_ = 0;
};

// Registers a call with a token (which may be null) for the guard's lifetime.
class CancelRegistration {
 public:
  CancelRegistration(CancelToken* token, std::function<void()> cancel) : token_(token) {
    if (token_ != nullptr) id_ = token_->Register(std::move(cancel));
  }
  ~CancelRegistration() {
    if (token_ != nullptr) token_->Unregister(id_);
  }
  CancelRegistration(const CancelRegistration&) = delete;
  CancelRegistration& operator=(const CancelRegistration&) = delete;

 private:
  CancelToken* token_;
  CancelToken::Id id_ = 0;
};

}  // namespace herd
