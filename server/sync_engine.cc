// ps_sync: the mean of M pushes per round goes through the optimizer.

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

absl::Status SyncEngine::PushLocked(KeyState& ks, const PushArgs& args,
                                    std::unique_lock<std::mutex>&, Deadline) {
  HERD_RETURN_IF_ERROR(CheckRound(config_, ks.version, ks.pushed, args));
  HERD_RETURN_IF_ERROR(CheckFp32Gradient(args, ks.count));
  const auto* grad = reinterpret_cast<const float*>(args.data.data());
  for (int64_t i = 0; i < ks.count; ++i) ks.accum[i] += grad[i];
  ks.pushed[args.worker] = true;
  if (++ks.pushed_count < config_.workers) return absl::OkStatus();

  if (config_.average && config_.workers > 1) {
    const float inv = 1.0f / static_cast<float>(config_.workers);
    for (float& g : ks.accum) g *= inv;
  }
  ApplyOptimizer(config_.optimizer, ks.params, ks.accum, ks.slot0, ks.slot1, ks.version + 1);
  std::fill(ks.accum.begin(), ks.accum.end(), 0.0f);
  std::fill(ks.pushed.begin(), ks.pushed.end(), false);
  ks.pushed_count = 0;
  return CompleteRoundLocked(ks, args.key);
}

}  // namespace herd::server
