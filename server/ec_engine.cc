// ps_ec: C_LP_S on the server side. The round's pushes are decompressed and summed; the sum
// plus the residual epsilon is compressed for the pulls, and what compression dropped becomes
// the new epsilon (algorithms/compression/error_feedback.h). In an elastic job a round
// completes with the live workers' pushes, as ps_sync's (engine.h, RoundCompleteWith); a worker
// back in its slot counts from the round a live worker announces it in (PushArgs::joiners).

#include <algorithm>

#include "absl/strings/str_format.h"
#include "algorithms/compression/error_feedback.h"
#include "server/engines.h"

namespace herd::server {

absl::Status EcEngine::PushLocked(KeyState& ks, const PushArgs& args,
                                  std::unique_lock<std::mutex>& lock, Deadline deadline) {
  AwaitPlanNamingLiveLocked(ks, args, lock, deadline);
  // A worker back in its slot counts from the round its source announced it in: its model is
  // its own, and a round it missed would leave it behind the others for good.
  HERD_RETURN_IF_ERROR(CheckReturnedPushLocked(ks, args));
  HERD_RETURN_IF_ERROR(CheckRoundPushLocked(ks, args));
  // Decoded on its own (DecompressAdd validates the whole payload before it adds anything),
  // then summed in rank order with the round's others: the same pushes give the same round,
  // whatever order they came in. The round's last push is taken only once the round is kept.
  std::vector<float> decoded(static_cast<size_t>(ks.count), 0.0f);
  if (auto st = compression::DecompressAdd(config_.compressor, args.data, decoded); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrFormat("push for key %s from worker %d: %s",
                                                      KeyName(args.key), args.worker,
                                                      std::string(st.message())));
  }
  // The round now waits for the workers this push announces (and counts its pusher).
  CountReturnedLocked(ks, args);
  if (!RoundCompleteWith(ks, args.worker)) {
    if (ks.pushed_count == 0) ks.refused_round = -1;  // a new try of a refused round
    TakeInRankOrderLocked(ks, args.worker, decoded);
    ks.pushed[args.worker] = true;
    ++ks.pushed_count;
    return absl::OkStatus();
  }
  std::vector<bool> pushers = ks.pushed;
  pushers[args.worker] = true;
  return CompleteRoundLocked(ks, args.key, SumInRankOrderLocked(ks, args.worker, decoded),
                             std::move(pushers));
}

absl::Status EcEngine::CompleteRoundLocked(KeyState& ks, KeyId key, std::vector<float> sum,
                                           std::vector<bool> pushers) {
  // The workers scale what they pull by 1/M. A round of an elastic job that completed with the
  // n < M live workers' pushes is scaled by M/n first, so it still reads as the sum of M pushes
  // (the workers then step with the mean of the n) and the residual epsilon keeps its units.
  const auto n = static_cast<int>(std::count(pushers.begin(), pushers.end(), true));
  if (n > 0 && n != config_.workers) {
    const float scale = static_cast<float>(config_.workers) / static_cast<float>(n);
    for (float& v : sum) v *= scale;
  }
  absl::Status st;
  const std::string_view sum_bytes(reinterpret_cast<const char*>(sum.data()),
                                   sum.size() * sizeof(float));
  if (int64_t at = FirstNonFinite(sum_bytes); at >= 0) {
    st = absl::InvalidArgumentError(absl::StrFormat(
        "round %d of key %s refused: the sum of %s is not finite at index %d; the key stays at "
        "version %d",
        ks.version, KeyName(key), PushersOf(pushers), at, ks.version));
  } else {
    NextState next;
    next.epsilon = ks.epsilon;
    next.result.emplace();
    std::vector<float> scratch;
    compression::CompressWithFeedback(config_.compressor, sum, *next.epsilon, &*next.result,
                                      &scratch);
    st = CommitRoundLocked(ks, key, std::move(next), PushersOf(pushers));
    if (absl::IsUnavailable(st)) return st;  // not written: the round waits for this push again
  }
  ClearRoundLocked(ks);
  if (!st.ok()) {
    ks.refused_round = ks.version;
    ks.refused = st;
    ks.cv.notify_all();
  }
  return st;
}

}  // namespace herd::server
