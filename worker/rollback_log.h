#pragma once
// An elastic worker's rollback log (docs/elastic.md, "Shrink"): the state after each of the two
// newest iterations it ended, kept in memory, and where in the data each iteration it began
// lately started. When a peer dies, the scheduler starts a new epoch at the first iteration
// some live worker has not completed; every survivor goes back to the state before it, which
// is one of the two commits (a survivor may be one iteration ahead of the slowest), and runs
// it again from its data position.
//
// The session takes the commits (it knows the executor and the model); the log only keeps them.
// Memory: two copies of the exported state (parameters, optimizer slots, residuals).

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <vector>

#include "checkpoint/state.h"
#include "worker/data/epoch_order.h"

namespace herd::worker {

class RollbackLog {
 public:
  struct Commit {
    int64_t iteration = 0;  // the state after this iteration
    checkpoint::ProcessState state;
  };

  bool empty() const { return commits_.empty(); }
  // Whether the newest commit is the state after `iteration` (it is not taken again).
  bool Newest(int64_t iteration) const {
    return !commits_.empty() && commits_.back().iteration == iteration;
  }
  // Keeps `state` as the state after `iteration`; the oldest of three goes. `seconds`: what
  // taking it cost (for mean_commit_ms).
  void Keep(int64_t iteration, checkpoint::ProcessState state, double seconds);
  // The state after `iteration`; null when the log does not hold it.
  const Commit* Find(int64_t iteration) const;
  // After a rollback to the state after `iteration`: the newer commits run again, they go.
  void DropAfter(int64_t iteration);
  // The iterations whose state the log holds, oldest first (an error names them).
  std::vector<int64_t> Held() const;

  // Where the data of `iteration` begins (the four newest are kept).
  void NotePosition(int64_t iteration, const DataPosition& at);
  std::optional<DataPosition> PositionOf(int64_t iteration) const;

  int64_t commits_taken() const { return commits_taken_; }
  // Milliseconds per commit on average (0 before the first).
  double mean_commit_ms() const {
    return commits_taken_ == 0 ? 0 : 1000.0 * commit_seconds_ / static_cast<double>(commits_taken_);
  }

 private:
  static constexpr size_t kCommits = 2;
  static constexpr size_t kPositions = 4;

  std::deque<Commit> commits_;
  std::map<int64_t, DataPosition> positions_;
  double commit_seconds_ = 0;
  int64_t commits_taken_ = 0;
};

}  // namespace herd::worker
