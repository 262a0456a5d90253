#include "server/idle_watchdog.h"

#include <algorithm>

namespace herd::server {

IdleWatchdog::IdleWatchdog(std::chrono::milliseconds idle)
    : idle_(std::max(idle, std::chrono::milliseconds(1))), thread_([this] { Loop(); }) {}

IdleWatchdog::~IdleWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

IdleWatchdog::ReadGuard::ReadGuard(IdleWatchdog* w, grpc::ServerContext* ctx, bool first)
    : w_(w), ctx_(ctx) {
  std::lock_guard<std::mutex> lock(w_->mu_);
  w_->armed_[ctx_] = std::chrono::steady_clock::now() + (first ? w_->first_idle() : w_->idle_);
  w_->fired_.erase(ctx_);
  w_->cv_.notify_all();
}

IdleWatchdog::ReadGuard::~ReadGuard() {
  std::lock_guard<std::mutex> lock(w_->mu_);
  w_->armed_.erase(ctx_);
  w_->fired_.erase(ctx_);
}

bool IdleWatchdog::ReadGuard::timed_out() const {
  std::lock_guard<std::mutex> lock(w_->mu_);
  auto it = w_->fired_.find(ctx_);
  return it != w_->fired_.end() && it->second;
}

void IdleWatchdog::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    auto next = std::chrono::steady_clock::time_point::max();
    const auto now = std::chrono::steady_clock::now();
    for (auto it = armed_.begin(); it != armed_.end();) {
      if (it->second <= now) {
        // TryCancel may be called from any thread; the blocked Read() returns false. The
        // guard (still registered: its destructor needs mu_) keeps ctx alive until then.
        it->first->TryCancel();
        fired_[it->first] = true;
        it = armed_.erase(it);
      } else {
        next = std::min(next, it->second);
        ++it;
      }
    }
    if (next == std::chrono::steady_clock::time_point::max()) {
      cv_.wait(lock);
    } else {
      cv_.wait_until(lock, next);
    }
  }
}

OpeningStreams::Guard::Guard(OpeningStreams* s, const grpc::ServerContext* ctx)
    : s_(s), peer_(ctx->peer()) {
  std::lock_guard<std::mutex> lock(s_->mu_);
  int& n = s_->opening_[peer_];
  if (n >= s_->max_) {
    if (n == 0) s_->opening_.erase(peer_);
    return;
  }
  ++n;
  admitted_ = counted_ = true;
}

void OpeningStreams::Guard::Done() {
  if (!counted_) return;
  counted_ = false;
  std::lock_guard<std::mutex> lock(s_->mu_);
  auto it = s_->opening_.find(peer_);
  if (it != s_->opening_.end() && --it->second <= 0) s_->opening_.erase(it);
}

}  // namespace herd::server
