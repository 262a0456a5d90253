#include "worker/rollback_log.h"

#include <algorithm>

namespace herd::worker {

void RollbackLog::Keep(int64_t iteration, checkpoint::ProcessState state, double seconds) {
  // Reusing the oldest commit's memory is not worth it: two copies of the state are kept.
  commits_.push_back(Commit{iteration, std::move(state)});
  while (commits_.size() > kCommits) commits_.pop_front();
  commit_seconds_ += seconds;
  ++commits_taken_;
}

const RollbackLog::Commit* RollbackLog::Find(int64_t iteration) const {
  auto it = std::find_if(commits_.begin(), commits_.end(),
                         [&](const Commit& c) { return c.iteration == iteration; });
  return it == commits_.end() ? nullptr : &*it;
}

void RollbackLog::DropAfter(int64_t iteration) {
  std::erase_if(commits_, [&](const Commit& c) { return c.iteration > iteration; });
}

std::vector<int64_t> RollbackLog::Held() const {
  std::vector<int64_t> held;
  for (const auto& c : commits_) held.push_back(c.iteration);
  return held;
}

void RollbackLog::NotePosition(int64_t iteration, const DataPosition& at) {
  positions_[iteration] = at;
  while (positions_.size() > kPositions) positions_.erase(positions_.begin());
}

std::optional<DataPosition> RollbackLog::PositionOf(int64_t iteration) const {
  auto it = positions_.find(iteration);
  if (it == positions_.end()) return std::nullopt;
  return it->second;
}

}  // namespace herd::worker
