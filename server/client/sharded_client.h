#pragma once
// A worker's view of a whole model on the shards of a plan: splits tensors into the plan's
// chunks, talks to every shard at once (one thread per shard), and reassembles. Keeps the
// worker side of ps_ec: the residual delta of each key (algorithms/compression).
//
// Rounds survive a shard restart: PushPull retries a shard that answers UNAVAILABLE until
// `retry_for`, first asking which keys already completed the round (their push was applied
// before the crash, written, but not acknowledged) and then pushing the others one by one,
// taking ALREADY_EXISTS as "the shard has it" (a connection that failed while the shard
// lived). Not thread-safe: one per worker.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "algorithms/compression/compressor.h"
#include "server/client/ps_client.h"
#include "server/keys.h"

namespace herd::server {

struct ChunkPlacement {
  KeyId key;
  int64_t offset = 0;  // first element in the tensor
  int64_t count = 0;
  int server = 0;
};

struct ShardedOptions {
  std::string job;
  int worker = 0;
  std::vector<std::string> addresses;          // by shard id
  std::vector<ChunkPlacement> chunks;          // the plan's shard map
  PsClientOptions client;                      // address is filled per shard
  std::chrono::milliseconds retry_for{30000};  // how long PushPull rides out a shard restart
  bool async = false;  // the job runs ps_async (the round of a push is the worker's clock)
  // Where shard `id` serves now (from the scheduler's plan), or an error. While a shard is
  // UNAVAILABLE, PushPull asks this about twice a second and reconnects when the address
  // changed: a shard restarted without a fixed port registers a new one. Unset: the addresses
  // above for good.
  std::function<absl::StatusOr<std::string>(int shard)> resolve_address;
};

class ShardedPsClient {
 public:
  static absl::StatusOr<std::unique_ptr<ShardedPsClient>> Connect(ShardedOptions options);

  // Sends every chunk's initial value (the first value given for a key wins on the shard).
  // Init and Pull ride out a shard that is starting or restarting, like PushPull.
  absl::Status Init(const std::vector<std::vector<float>>& tensors);
  // ps_sync / ps_async: pushes `grads` as round `round` (ps_async: the worker's clock) and
  // fills `params` with what the shards answer (ps_sync: the parameters after the round).
  // Returns the smallest version seen.
  absl::StatusOr<int64_t> PushPull(int64_t round, const std::vector<std::vector<float>>& grads,
                                   std::vector<std::vector<float>>* params);
  // ps_ec: compresses `grads` with this worker's residuals, pushes round `round`, and fills
  // `sums` with the decompressed sums the shards answer.
  absl::StatusOr<int64_t> PushPullCompressed(compression::Compressor compressor, int64_t round,
                                             const std::vector<std::vector<float>>& grads,
                                             std::vector<std::vector<float>>* sums);
  // Push only (ps_sync / ps_async: fp32; ps_ec when `compressor` is set: compressed with this
  // worker's residuals). No retry. Returns once every shard acknowledged.
  absl::Status Push(int64_t round, const std::vector<std::vector<float>>& grads,
                    const compression::Compressor* compressor = nullptr);
  // The current parameters (at least `min_version` on every key).
  absl::StatusOr<int64_t> Pull(int64_t min_version, std::vector<std::vector<float>>* params);
  // This worker's ps_ec residual of a key (zeros before the first push).
  const std::vector<float>& residual(KeyId key) { return delta_[key]; }
  // Puts back a residual (a checkpoint, or the executor this worker's replaces).
  void set_residual(KeyId key, std::vector<float> values) { delta_[key] = std::move(values); }
  // ps_sync / ps_async: the learning rate the next pushes carry (a training program's schedule);
  // 0 (the default): the job's, as the shards were configured.
  void set_learning_rate(double lr) { learning_rate_ = lr; }
  // ps_ec: the workers back in their slot that the next pushes announce to the shards
  // (PushChunk.joiners; this worker handed them its state). Cleared by the caller after the
  // round that carried them.
  void set_joiners(std::vector<int> ranks) { joiners_ = std::move(ranks); }
  // ps_async: the job's iteration the next pushes belong to (PushChunk.iteration); a negative
  // value sends none.
  void set_iteration(int64_t iteration) { iteration_ = iteration; }
  PsClient& shard(int id) { return *clients_[id]; }
  int shards() const { return static_cast<int>(clients_.size()); }

 private:
  explicit ShardedPsClient(ShardedOptions options) : options_(std::move(options)) {}
  // Runs fn(shard id) for every shard on its own thread; the first error wins.
  absl::Status ForEachShard(const std::function<absl::Status(int)>& fn);
  // The push chunks of every shard (compressed when `compressor` is set).
  std::vector<std::vector<herd::v1::PushChunk>> MakePushes(
      int64_t round, const std::vector<std::vector<float>>& grads,
      const compression::Compressor* compressor);
  absl::Status RoundOnShard(int shard, int64_t round, const std::vector<herd::v1::PushChunk>& all,
                            std::vector<herd::v1::PullChunk>* out);
  // Runs an idempotent call (InitKeys, Pull) on `shard`, again while it answers UNAVAILABLE,
  // until `retry_for`, following the shard to a new address when resolve_address gives one.
  absl::Status WhileUnavailable(int shard, const std::function<absl::Status()>& call);
  // One attempt to finish a round on a shard after the connection failed mid-round.
  // Reconnects shard `shard` when resolve_address gives a new address (only that shard's
  // thread touches its client).
  void Reresolve(int shard);
  absl::Status ResumeOnShard(int shard, int64_t round, const std::vector<herd::v1::PushChunk>& all,
                             std::vector<herd::v1::PullChunk>* out);

  // The placement of a key a shard answered; DATA_LOSS for a key that is not that shard's.
  absl::StatusOr<const ChunkPlacement*> Find(int shard, const herd::v1::PullChunk& p) const;
  // Copies a pulled chunk of `shard` into its place in `params` (DATA_LOSS on a wrong size).
  absl::Status CopyPulled(int shard, const herd::v1::PullChunk& p,
                          std::vector<std::vector<float>>* params) const;

  ShardedOptions options_;
  double learning_rate_ = 0;
  std::vector<int> joiners_;
  int64_t iteration_ = -1;
  std::map<KeyId, const ChunkPlacement*> index_;  // into options_.chunks
  std::vector<std::unique_ptr<PsClient>> clients_;
  std::map<KeyId, std::vector<float>> delta_;
};

}  // namespace herd::server
