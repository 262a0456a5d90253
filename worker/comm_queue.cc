#include "worker/comm_queue.h"

#include "absl/strings/str_format.h"

namespace herd::worker {

CommQueue::CommQueue(Timeline* timeline) : timeline_(timeline), thread_([this] { Run(); }) {}

CommQueue::~CommQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

CommQueue::Ticket CommQueue::Submit(std::string name, Op op) {
  std::lock_guard<std::mutex> lock(mu_);
  const Ticket t = next_ticket_++;
  queue_.push_back({t, std::move(name), std::move(op)});
  cv_.notify_all();
  return t;
}

void CommQueue::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything submitted ran
    Item item = std::move(queue_.front());
    queue_.pop_front();
    absl::Status st = failed_;
    if (st.ok()) {
      running_ = item.name;
      lock.unlock();
      Timeline::Span span(timeline_, item.name, Timeline::Lane::kComm);
      st = item.op();
      lock.lock();
      running_.clear();
      if (!st.ok()) {
        failed_ = absl::Status(st.code(), absl::StrFormat("%s: %s", item.name, st.message()));
      }
    }
    done_ = item.ticket;
    cv_.notify_all();
  }
}

absl::Status CommQueue::Wait(Ticket ticket, Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  auto finished = [&] { return done_ >= ticket; };
  if (deadline.infinite()) {
    cv_.wait(lock, finished);
  } else if (!cv_.wait_until(lock, deadline.at(), finished)) {
    return absl::DeadlineExceededError(absl::StrFormat(
        "communication did not finish in time (running: %s, %d operation(s) queued)",
        running_.empty() ? "nothing" : running_, queue_.size()));
  }
  // Operations are FIFO and a failure stops the rest: any error so far concerns this ticket too.
  return failed_;
}

absl::Status CommQueue::Drain(Deadline deadline) {
  Ticket last;
  {
    std::lock_guard<std::mutex> lock(mu_);
    last = next_ticket_ - 1;
  }
  return Wait(last, deadline);
}

}  // namespace herd::worker
