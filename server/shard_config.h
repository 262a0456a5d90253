#pragma once
// What one shard needs to know about its job: the mode, the workers, the optimizer, the
// durability policy and the shard map (all keys, so a misrouted push can be told where its key
// lives). Built from the scheduler's JobSpec and Plan by FromJob; plain data otherwise, so
// the engines and their tests need no scheduler.

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "algorithms/compression/compressor.h"
#include "algorithms/optim/optimizer.h"
#include "server/keys.h"

namespace herd::v1 {
class JobSpec;
class Plan;
}  // namespace herd::v1

namespace herd::server {

// A shard applies the optimizers every worker uses (algorithms/optim).
using optim::ApplyOptimizer;
using optim::OptimizerConfig;
using optim::OptimizerName;
using optim::OptimizerSlots;
using optim::ParseOptimizer;

enum class Mode { kSync, kAsync, kEc };
std::string ModeName(Mode mode);

struct Durability {
  enum class Kind { kEveryRound, kEveryK, kCheckpointOnly };
  Kind kind = Kind::kEveryRound;
  int64_t k = 1;  // kEveryK: write a key after every k rounds (pushes in ps_async)
};
// "every-round" | "every-k:K" (K >= 1) | "checkpoint-only". INVALID_ARGUMENT otherwise.
absl::StatusOr<Durability> ParseDurability(const std::string& text);
std::string DurabilityName(const Durability& d);

struct KeyPlacement {
  int64_t count = 0;   // fp32 elements of the chunk
  int server = 0;      // the shard that owns it
  int64_t offset = 0;  // its first element in the tensor
};

struct ShardConfig {
  std::string job;
  int shard = 0;
  Mode mode = Mode::kSync;
  int workers = 1;      // M: ranks 0..M-1
  bool average = true;  // ps_sync: divide the sum by M before the optimizer
  // The job is elastic (JobSpec.elastic): a ps_sync or ps_ec round completes once every *live*
  // worker pushed it (docs/elastic.md); otherwise it waits for all M.
  bool elastic = false;
  // Elastic jobs: how long a push from a worker the shard still believes dead waits for the
  // plan that names it live again (a restarted worker may push before the shard's watch of the
  // scheduler's plans hears of its return) before it is refused. Tests lower it.
  std::chrono::milliseconds plan_wait{2500};
  OptimizerConfig optimizer;
  int64_t staleness = 4;  // ps_async bound s (kInfiniteStaleness: none)
  compression::Compressor compressor = compression::Compressor::kMinMaxUInt8;  // ps_ec
  Durability durability;
  std::map<KeyId, KeyPlacement> keys;  // every key of the job
  // The job's tensor names, by KeyId::tensor (JobSpec.tensors): a checkpoint names a key's
  // state after its tensor, so that workers and shards of any layout find it again.
  std::vector<std::string> tensor_names;
  // Each tensor's own learning-rate scale and weight decay (TensorSpec), by KeyId::tensor
  // (empty or short: the optimizer's, as in tests).
  std::vector<optim::TensorHyper> tensor_hyper;

  static constexpr int64_t kInfiniteStaleness = INT64_MAX / 4;
};

// The config of shard `shard` of the job. INVALID_ARGUMENT for a job this shard cannot serve
// (not a ps_* mode, non-floating or non-fp32 tensors, unknown optimizer or compressor).
// The name of tensor `tensor` ("tensor-<i>" when the config lists no names: tests).
std::string TensorNameOf(const ShardConfig& config, int32_t tensor);

absl::StatusOr<ShardConfig> ShardConfigFromJob(const herd::v1::JobSpec& spec,
                                               const herd::v1::Plan& plan, int shard,
                                               const Durability& durability);

}  // namespace herd::server
