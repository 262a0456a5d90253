#pragma once
// The communication thread of a worker. Collectives in herd are blocking functions; a worker
// overlaps them with compute by handing them, in order, to this one thread. Every rank submits
// the same operations in the same order, so the blocking collectives of the ranks meet.
//
// Submit() returns a ticket; Wait(ticket, deadline) blocks the caller (the compute thread)
// until that operation finished and returns its status. An operation that fails leaves the
// queue failed: later operations are not run and report the first error, because a failed
// collective leaves its communicator aborted.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "common/deadline.h"
#include "common/timeline.h"

namespace herd::worker {

class CommQueue {
 public:
  using Op = std::function<absl::Status()>;
  using Ticket = uint64_t;

  // `timeline` (may be null) records each operation on the communication lane under its name.
  explicit CommQueue(Timeline* timeline = nullptr);
  ~CommQueue();  // runs what was submitted to the end (or to the first error), then joins
  CommQueue(const CommQueue&) = delete;
  CommQueue& operator=(const CommQueue&) = delete;

  Ticket Submit(std::string name, Op op);
  // The status of the operation of `ticket`; DEADLINE_EXCEEDED (naming it) when it did not
  // finish by `deadline` — it keeps running.
  absl::Status Wait(Ticket ticket, Deadline deadline);
  // Waits for everything submitted so far.
  absl::Status Drain(Deadline deadline);

 private:
  struct Item {
    Ticket ticket;
    std::string name;
    Op op;
  };
  void Run();  // the communication thread: runs the queue in order

  Timeline* timeline_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  Ticket next_ticket_ ABSL_GUARDED_BY(mu_) = 1;
  Ticket done_ ABSL_GUARDED_BY(mu_) = 0;  // every ticket <= done_ has finished
  std::string running_ ABSL_GUARDED_BY(mu_);
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace herd::worker
