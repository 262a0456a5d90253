#pragma once
// The scheduler's state sequence: how a restarted scheduler learns that the state it recovered
// is older than what it had acknowledged.
//
// Every write of the scheduler's state (StateDb) stores the next number of one counter in the
// same atomic batch. Answers to a job's processes carry the counter as it was when the
// scheduler answered (`state_seq`); every process keeps the highest number it heard and sends
// it back (`seen_state_seq`). A write-ahead log cut at a record boundary, or the unsynced tail
// a power cut takes, replays "cleanly" without its last batches, and nothing in the database
// tells; a process that heard a number from one of those batches does.
//
// Each start numbers its writes from a new base: the wall clock in microseconds, or one past
// the recovered number when that is later. So a number heard before a restart is never taken
// for one written after it, however many writes the new start makes before the witness comes,
// and a start whose every write was lost does not hand out its numbers a second time (the
// clock moved on). This holds while one start writes fewer than a million batches a second on
// average (the scheduler writes at most thousands) and the clock does not step back past an
// earlier start.

#include <algorithm>
#include <cstdint>

namespace herd::scheduler {

class StateSequence {
 public:
  // `recovered`: the number of the newest write the open found (0: none, e.g. a new state).
  // `now_us`: the wall clock, microseconds since the Unix epoch.
  StateSequence(uint64_t recovered, uint64_t now_us)
      : recovered_(recovered), base_(std::max(recovered + 1, now_us)), current_(recovered) {}

  uint64_t recovered() const { return recovered_; }
  // The number of the newest write: recovered() until this start writes.
  uint64_t current() const { return current_; }
  // The number the next write stores.
  uint64_t next() const { return current_ < base_ ? base_ : current_ + 1; }
  // The write that stored next() succeeded.
  void Advance() { current_ = next(); }

  // Whether the state holds the write numbered `seen`, which a process heard from this
  // scheduler (0: one that heard nothing). False for a write of an earlier start that the
  // open did not recover, and for a number this start never wrote.
  bool Holds(uint64_t seen) const {
    return seen <= recovered_ || (seen >= base_ && seen <= current_);
  }

 private:
  uint64_t recovered_;
  uint64_t base_;  // this start's first number
  uint64_t current_;
};

}  // namespace herd::scheduler
