// ps_async: every push is applied at once; bounded staleness on the per-key worker clocks.

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/status.h"
#include "server/engines.h"

namespace herd::server {

std::pair<int64_t, int> AsyncEngine::SlowestLocked(const KeyState& ks) const {
  int64_t slowest = INT64_MAX;
  int who = -1;
  for (int w = 0; w < config_.workers; ++w) {
    if (LiveWorker(w) && ks.clocks[w] < slowest) {
      slowest = ks.clocks[w];
      who = w;
    }
  }
  return {slowest, who};
}

void AsyncEngine::RebaseReturnerLocked(KeyState& ks, int w, const PushArgs& args) const {
  // The live peers' clocks run one per iteration from a common start (their offset): the
  // returner goes on at the clock of its iteration. It joined after the horizon the peers were
  // granted, so it may be ahead of them, and then waits within the staleness bound like anyone
  // ahead; it must not start behind, for it would end behind: its last push would leave the
  // peers' last iterations waiting on it for good. Without its iteration or a peer's offset
  // it goes on at the slowest live peer's clock (the survivors, held by its old clock since
  // it came back, wait for no one).
  int64_t slowest = INT64_MAX;
  int64_t offset = KeyState::kNoOffset;
  for (int o = 0; o < config_.workers; ++o) {
    if (o == w || !LiveWorker(o)) continue;
    slowest = std::min(slowest, ks.clocks[o]);
    offset = std::max(offset, ks.iteration_offset[o]);
  }
  if (args.iteration.has_value() && offset != KeyState::kNoOffset) {
    // Never back: the slot's earlier pushes stay counted once.
    ks.clocks[w] = std::max(ks.clocks[w], *args.iteration + offset);
    ks.clock_base[w] = ks.clocks[w] - args.round;
    return;
  }
  // A worker that only was not yet live when the shard heard its first plan (a job's start)
  // pushes the clock the slot has, no later than its peers': it keeps its count.
  const bool behind = slowest != INT64_MAX && ks.clocks[w] < slowest;
  if (args.round + ks.clock_base[w] != ks.clocks[w] || behind) {
    if (slowest != INT64_MAX) ks.clocks[w] = slowest;
    ks.clock_base[w] = ks.clocks[w] - args.round;
  }
}

absl::Status AsyncEngine::PushLocked(KeyState& ks, const PushArgs& args,
                                     std::unique_lock<std::mutex>& lock, Deadline deadline) {
  HERD_RETURN_IF_ERROR(CheckFp32Gradient(args, ks.count));
  const int w = args.worker;
  if (args.iteration.has_value() && (*args.iteration < 0 || *args.iteration > kMaxIteration)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("worker %d pushed key %s as of iteration %d; iterations are 0 to %d", w,
                        KeyName(args.key), *args.iteration, kMaxIteration));
  }
  bool returned = false;
  if (const int64_t returns = ReturnsOf(w); ks.based_on_return[w] != returns) {
    // Back in its slot (a worker restarted into the running elastic job): its new executor
    // counts its clock from 0, the key's clock of the slot is where its predecessor died.
    ks.based_on_return[w] = returns;
    returned = true;
    RebaseReturnerLocked(ks, w, args);
  }
  // The key's clock this push is.
  const int64_t round = args.round + ks.clock_base[w];
  auto check_clock = [&]() -> absl::Status {
    const int64_t clock = ks.clocks[w];
    if (round < clock) {
      return absl::AlreadyExistsError(
          absl::StrFormat("worker %d already pushed clock %d of key %s (its next clock is %d)", w,
                          round, KeyName(args.key), clock));
    }
    if (round > clock) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "worker %d pushed clock %d of key %s, but its next clock is %d (clocks go one by one)", w,
          round, KeyName(args.key), clock));
    }
    return absl::OkStatus();
  };
  HERD_RETURN_IF_ERROR(check_clock());
  // Bounded staleness: wait while this worker is more than s ahead of the slowest live one.
  // Not a returner's first push of the key: its gradient comes from the parameters it has just
  // pulled, nothing stale in it; and it must reach the shard's other keys too, whose old clock
  // of its slot holds the peers it would wait for (its next push waits).
  const int64_t s = config_.staleness;
  while (!returned) {
    HERD_RETURN_IF_ERROR(Usable());
    auto [slowest, who] = SlowestLocked(ks);
    if (who < 0 || round <= slowest + s) break;
    if (ks.cv.wait_until(lock, deadline.at()) == std::cv_status::timeout) {
      std::tie(slowest, who) = SlowestLocked(ks);
      if (who >= 0 && round > slowest + s) {
        return absl::DeadlineExceededError(absl::StrFormat(
            "worker %d at clock %d of key %s waited for worker %d (clock %d) to come within "
            "staleness %d, and the deadline passed",
            w, round, KeyName(args.key), who, slowest, s));
      }
    }
    HERD_RETURN_IF_ERROR(check_clock());  // another call of the same worker may have won
  }
  // Computed beside the key's state, taken only when finite and written (CommitRoundLocked).
  const auto* grad = reinterpret_cast<const float*>(args.data.data());
  NextState next;
  next.params = ks.params;
  next.slot0 = ks.slot0;
  next.slot1 = ks.slot1;
  optim::OptimizerConfig step = config_.optimizer;
  if (args.learning_rate > 0) step.learning_rate = args.learning_rate;  // this worker's schedule
  step = optim::ForTensor(step, TensorHyperOf(args.key.tensor));
  ApplyOptimizer(step, *next.params, std::span<const float>(grad, ks.count), *next.slot0,
                 *next.slot1, ks.version + 1);
  next.clocks = ks.clocks;
  ++(*next.clocks)[w];
  HERD_RETURN_IF_ERROR(
      CommitRoundLocked(ks, args.key, std::move(next),
                        absl::StrFormat("the push of worker %d (clock %d)", w, round)));
  if (args.iteration.has_value()) ks.iteration_offset[w] = round - *args.iteration;
  return absl::OkStatus();
}

absl::Status AsyncEngine::WaitReadable(KeyId key, int64_t pushed_clock, Deadline deadline) {
  const int64_t s = config_.staleness;
  // Reading after clock c needs pushes up to clock c - s from every live worker, i.e. c - s + 1
  // of them; nothing when s > c (this also keeps kInfiniteStaleness from overflowing).
  if (s > pushed_clock) return absl::OkStatus();
  const int64_t needed = pushed_clock - s + 1;
  HERD_ASSIGN_OR_RETURN(KeyState * ks, Lookup(config_.job, key));
  std::unique_lock<std::mutex> lock(ks->mu);
  for (;;) {
    HERD_RETURN_IF_ERROR(Usable());
    auto [slowest, who] = SlowestLocked(*ks);
    if (who < 0 || slowest >= needed) return absl::OkStatus();
    if (ks->cv.wait_until(lock, deadline.at()) == std::cv_status::timeout) {
      std::tie(slowest, who) = SlowestLocked(*ks);
      if (who < 0 || slowest >= needed) return absl::OkStatus();
      return absl::DeadlineExceededError(absl::StrFormat(
          "the read of key %s after clock %d waited for worker %d (%d pushes) to push clock %d "
          "(staleness %d), and the deadline passed",
          KeyName(key), pushed_clock, who, slowest, needed - 1, s));
    }
  }
}

}  // namespace herd::server
