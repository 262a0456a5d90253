// ps_sync: the mean of M pushes per round, summed in rank order, goes through the optimizer.

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_format.h"
#include "server/engines.h"

namespace herd::server {

absl::Status CheckRound(const ShardConfig& config, int64_t version, const std::vector<bool>& pushed,
                        const PushArgs& args) {
  if (args.round < version) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "round %d of key %s already completed (the key is at version %d): pull it and push "
        "round %d",
        args.round, KeyName(args.key), version, version));
  }
  if (args.round > version) {
    return absl::FailedPreconditionError(
        absl::StrFormat("round %d of key %s is not open yet: the key is collecting round %d",
                        args.round, KeyName(args.key), version));
  }
  if (pushed[args.worker]) {
    return absl::AlreadyExistsError(
        absl::StrFormat("worker %d already pushed round %d of key %s; a round takes one push "
                        "per worker",
                        args.worker, args.round, KeyName(args.key)));
  }
  return absl::OkStatus();
}

absl::Status CheckFp32Gradient(const PushArgs& args, int64_t count) {
  if (args.data.size() != static_cast<size_t>(count) * sizeof(float)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("push of %d bytes for key %s, which holds %d fp32 values (want %d bytes)",
                        args.data.size(), KeyName(args.key), count, count * 4));
  }
  // A NaN or infinity would be applied, written, and then served forever: refuse it whole.
  if (int64_t at = FirstNonFinite(args.data); at >= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "push from worker %d for key %s has a non-finite value at index %d; nothing was applied",
        args.worker, KeyName(args.key), at));
  }
  return absl::OkStatus();
}

int64_t FirstNonFinite(std::string_view fp32_bytes) {
  const size_t n = fp32_bytes.size() / sizeof(float);
  for (size_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, fp32_bytes.data() + i * sizeof(float), sizeof v);
    if (!std::isfinite(v)) return static_cast<int64_t>(i);
  }
  return -1;
}

std::string PushersOf(const std::vector<bool>& pushed) {
  std::vector<int> ranks;
  for (size_t w = 0; w < pushed.size(); ++w) {
    if (pushed[w]) ranks.push_back(static_cast<int>(w));
  }
  if (ranks.size() == 1) return absl::StrFormat("the push of worker %d", ranks[0]);
  std::string out = "the pushes of workers ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) out += i + 1 == ranks.size() ? " and " : ", ";
    out += std::to_string(ranks[i]);
  }
  return out;
}

absl::Status SyncEngine::PushLocked(KeyState& ks, const PushArgs& args,
                                    std::unique_lock<std::mutex>& lock, Deadline deadline) {
  AwaitPlanNamingLiveLocked(ks, args, lock, deadline);
  // A worker back in its slot counts from the round its source announced it in (or its own
  // first push of the open round): a push of a round that completed without it is refused.
  HERD_RETURN_IF_ERROR(CheckReturnedPushLocked(ks, args));
  HERD_RETURN_IF_ERROR(CheckRoundPushLocked(ks, args));
  HERD_RETURN_IF_ERROR(CheckFp32Gradient(args, ks.count));
  // One round, one step: its pushes step with the same learning rate (the workers follow the
  // same schedule). A disagreeing push is refused, and the round goes on without it.
  if (ks.pushed_count > 0 && args.learning_rate != ks.round_learning_rate) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "worker %d pushed round %d of key %s with learning rate %g, but the round's other "
        "pushes use %g (0: the job's); every worker must step with the same learning rate",
        args.worker, args.round, KeyName(args.key), args.learning_rate, ks.round_learning_rate));
  }
  const auto* grad = reinterpret_cast<const float*>(args.data.data());
  if (ks.pushed_count == 0) {
    ks.refused_round = -1;  // a new try of a refused round
    ks.round_learning_rate = args.learning_rate;
  }
  // The round now waits for the workers this push announces (and counts its pusher).
  CountReturnedLocked(ks, args);
  if (!RoundCompleteWith(ks, args.worker)) {
    TakeInRankOrderLocked(ks, args.worker,
                          std::span<const float>(grad, static_cast<size_t>(ks.count)));
    ks.pushed[args.worker] = true;
    ++ks.pushed_count;
    return absl::OkStatus();
  }
  return CompleteRoundLocked(ks, args.key, args.worker,
                             std::span<const float>(grad, static_cast<size_t>(ks.count)));
}

absl::Status SyncEngine::CompleteRoundLocked(KeyState& ks, KeyId key, int last_worker,
                                             std::span<const float> last) {
  // The round is computed beside the key's state, and taken only when it is finite and
  // written (CommitRoundLocked). Until then the last push is not added, so a failed write
  // can be retried by pushing again. Summed in rank order: the same pushes give the same
  // round, whatever order they came in.
  std::vector<float> mean = SumInRankOrderLocked(ks, last_worker, last);
  // The mean over the pushes the round took: all M, or in an elastic job after a death the
  // live workers' (and a dead worker's made before it died).
  const int pushers = ks.pushed_count + (last_worker >= 0 ? 1 : 0);
  if (config_.average && pushers > 1) {
    const float inv = 1.0f / static_cast<float>(pushers);
    for (float& g : mean) g *= inv;
  }
  NextState next;
  next.params = ks.params;
  next.slot0 = ks.slot0;
  next.slot1 = ks.slot1;
  optim::OptimizerConfig step = config_.optimizer;
  if (ks.round_learning_rate > 0) step.learning_rate = ks.round_learning_rate;
  step = optim::ForTensor(step, TensorHyperOf(key.tensor));
  ApplyOptimizer(step, *next.params, mean, *next.slot0, *next.slot1, ks.version + 1);
  std::vector<bool> pushers_of = ks.pushed;
  if (last_worker >= 0) pushers_of[last_worker] = true;
  absl::Status st = CommitRoundLocked(ks, key, std::move(next), PushersOf(pushers_of));
  if (absl::IsUnavailable(st)) return st;  // not written: the round waits for this push again
  // Taken or refused, the round is over: a refused one (non-finite) is dropped whole and
  // reopened, and whoever waits for it hears why.
  ClearRoundLocked(ks);
  if (!st.ok()) {
    ks.refused_round = ks.version;
    ks.refused = st;
    ks.cv.notify_all();
  }
  return st;
}

}  // namespace herd::server
