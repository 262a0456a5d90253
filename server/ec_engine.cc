// ps_ec: C_LP_S on the server side. The round's pushes are decompressed and summed; the sum
// plus the residual epsilon is compressed for the pulls, and what compression dropped becomes
// the new epsilon (algorithms/compression/error_feedback.h).

#include <algorithm>

#include "absl/strings/str_format.h"
#include "algorithms/compression/error_feedback.h"
#include "server/engines.h"

namespace herd::server {

absl::Status EcEngine::PushLocked(KeyState& ks, const PushArgs& args, std::unique_lock<std::mutex>&,
                                  Deadline) {
  HERD_RETURN_IF_ERROR(CheckRound(config_, ks.version, ks.pushed, args));
  // Summed beside the accumulator: the round's last push is taken only once the round is kept.
  std::vector<float> sum(ks.accum);
  // DecompressAdd validates the whole payload before it adds anything.
  if (auto st = compression::DecompressAdd(config_.compressor, args.data, sum); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrFormat("push for key %s from worker %d: %s",
                                                      KeyName(args.key), args.worker,
                                                      std::string(st.message())));
  }
  if (ks.pushed_count + 1 < config_.workers) {
    if (ks.pushed_count == 0) ks.refused_round = -1;  // a new try of a refused round
    ks.accum.swap(sum);
    ks.pushed[args.worker] = true;
    ++ks.pushed_count;
    return absl::OkStatus();
  }
  std::vector<bool> pushers = ks.pushed;
  pushers[args.worker] = true;
  absl::Status st;
  const std::string_view sum_bytes(reinterpret_cast<const char*>(sum.data()),
                                   sum.size() * sizeof(float));
  if (int64_t at = FirstNonFinite(sum_bytes); at >= 0) {
    st = absl::InvalidArgumentError(absl::StrFormat(
        "round %d of key %s refused: the sum of %s is not finite at index %d; the key stays at "
        "version %d",
        ks.version, KeyName(args.key), PushersOf(pushers), at, ks.version));
  } else {
    NextState next;
    next.epsilon = ks.epsilon;
    next.result.emplace();
    std::vector<float> scratch;
    compression::CompressWithFeedback(config_.compressor, sum, *next.epsilon, &*next.result,
                                      &scratch);
    st = CommitRoundLocked(ks, args.key, std::move(next), PushersOf(pushers));
    if (absl::IsUnavailable(st)) return st;  // not written: the round waits for this push again
  }
  std::fill(ks.accum.begin(), ks.accum.end(), 0.0f);
  std::fill(ks.pushed.begin(), ks.pushed.end(), false);
  ks.pushed_count = 0;
  if (!st.ok()) {
    ks.refused_round = ks.version;
    ks.refused = st;
    ks.cv.notify_all();
  }
  return st;
}

}  // namespace herd::server
