#pragma once
// A Communicator that forwards to another and adds up the time spent blocked in wait(): the
// benchmark's breakdown of a collective's time into "waiting for the transport" and
// everything else (reductions, copies, posting requests). Thread-compatible like the
// collectives that use it: one operation at a time.

#include <atomic>
#include <chrono>

#include "common/deadline.h"
#include "transport/communicator.h"

namespace herd::bench {

class TimedCommunicator : public transport::Communicator {
 public:
  // `inner` must outlive this object.
  explicit TimedCommunicator(transport::Communicator& inner) : inner_(inner) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string_view backend() const override { return inner_.backend(); }
  transport::MemoryKind memory() const override { return inner_.memory(); }
  transport::NativeCollectives* native() override { return inner_.native(); }

  transport::Request isend(int peer, transport::Tag tag, ConstBytes buf) override {
    return inner_.isend(peer, tag, buf);
  }
  transport::Request irecv(int peer, transport::Tag tag, MutableBytes buf) override {
    return inner_.irecv(peer, tag, buf);
  }
  absl::Status wait(transport::Request& req, Deadline deadline) override {
    const auto start = Clock::now();
    absl::Status st = inner_.wait(req, deadline);
    waited_ns_.fetch_add(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count(),
        std::memory_order_relaxed);
    return st;
  }
  absl::Status abort(absl::Status why) override { return inner_.abort(std::move(why)); }
  absl::Status status() const override { return inner_.status(); }

  // Seconds blocked in wait() since the last reset.
  double waited_seconds() const { return waited_ns_.load(std::memory_order_relaxed) * 1e-9; }
  void reset() { waited_ns_.store(0, std::memory_order_relaxed); }

 private:
  transport::Communicator& inner_;
  std::atomic<int64_t> waited_ns_{0};
};

}  // namespace herd::bench
