#pragma once
// The three engines behind Engine::Create (engine.h documents their rules).

#include <span>
#include "common/status.h"

#include "server/engine.h"

namespace herd::server {

class SyncEngine final : public Engine {
 public:
  SyncEngine(ShardConfig config, KeyWriter* writer) : Engine(std::move(config), writer) {}

 private:
  absl::Status PushLocked(KeyState& ks, const PushArgs& args, std::unique_lock<std::mutex>& lock,
                          Deadline deadline) override;
  absl::Status CompleteOpenRoundLocked(KeyState& ks, KeyId key) override {
    return CompleteRoundLocked(ks, key, -1, {});
  }
  // Applies the open round: the mean (or sum) of the accumulated pushes plus `last` (may be
  // empty) through the optimizer. See PushLocked for what a failed write leaves.
  absl::Status CompleteRoundLocked(KeyState& ks, KeyId key, int last_worker,
                                   std::span<const float> last);
};

class AsyncEngine final : public Engine {
 public:
  AsyncEngine(ShardConfig config, KeyWriter* writer) : Engine(std::move(config), writer) {}

  absl::Status WaitReadable(KeyId key, int64_t pushed_clock, Deadline deadline) override;

 private:
  absl::Status PushLocked(KeyState& ks, const PushArgs& args, std::unique_lock<std::mutex>& lock,
                          Deadline deadline) override;
  // The slowest live worker's clock on the key, and its rank (-1: nobody is live).
  std::pair<int64_t, int> SlowestLocked(const KeyState& ks) const;
  // Where worker `w`, back in its slot, goes on: its clock base for `args.round` (see .cc).
  void RebaseReturnerLocked(KeyState& ks, int w, const PushArgs& args) const;
  // The most an iteration may be: far beyond any job, far from overflowing a clock.
  static constexpr int64_t kMaxIteration = int64_t{1} << 40;
};

class EcEngine final : public Engine {
 public:
  EcEngine(ShardConfig config, KeyWriter* writer) : Engine(std::move(config), writer) {}

 private:
  absl::Status PushLocked(KeyState& ks, const PushArgs& args, std::unique_lock<std::mutex>& lock,
                          Deadline deadline) override;
  std::string PullPayloadLocked(const KeyState& ks) const override { return ks.result; }
  absl::Status CompleteOpenRoundLocked(KeyState& ks, KeyId key) override {
    return CompleteRoundLocked(ks, key, SumInRankOrderLocked(ks, -1, {}), ks.pushed);
  }
  // Completes the open round whose pushes (`pushers`) sum to `sum`: compresses it (in units of
  // M pushes, see PushLocked) with the residual epsilon for the pulls. See SyncEngine's for
  // what a failed write leaves.
  absl::Status CompleteRoundLocked(KeyState& ks, KeyId key, std::vector<float> sum,
                                   std::vector<bool> pushers);
};

// The round checks ps_sync and ps_ec share: the round is the key's open one and the worker
// has not pushed it yet.
absl::Status CheckRound(const ShardConfig& config, int64_t version, const std::vector<bool>& pushed,
                        const PushArgs& args);

// "the pushes of workers 0, 1 and 2": who made a round, for the messages of a refused one.
std::string PushersOf(const std::vector<bool>& pushed);

// INVALID_ARGUMENT unless `data` holds exactly `count` fp32 values, all finite.
absl::Status CheckFp32Gradient(const PushArgs& args, int64_t count);
// The index of the first NaN or infinity among fp32 bytes, or -1.
int64_t FirstNonFinite(std::string_view fp32_bytes);

}  // namespace herd::server
