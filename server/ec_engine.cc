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
  // DecompressAdd validates the whole payload before it adds anything.
  if (auto st = compression::DecompressAdd(config_.compressor, args.data, ks.accum); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrFormat("push for key %s from worker %d: %s",
                                                      KeyName(args.key), args.worker,
                                                      std::string(st.message())));
  }
  ks.pushed[args.worker] = true;
  if (++ks.pushed_count < config_.workers) return absl::OkStatus();

  std::vector<float> scratch;
  compression::CompressWithFeedback(config_.compressor, ks.accum, ks.epsilon, &ks.result, &scratch);
  std::fill(ks.accum.begin(), ks.accum.end(), 0.0f);
  std::fill(ks.pushed.begin(), ks.pushed.end(), false);
  ks.pushed_count = 0;
  return CompleteRoundLocked(ks, args.key);
}

}  // namespace herd::server
