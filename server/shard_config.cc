#include "server/shard_config.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "herd/v1/job.pb.h"

namespace herd::server {

std::string ModeName(Mode mode) {
  switch (mode) {
    case Mode::kSync:
      return "ps_sync";
    case Mode::kAsync:
      return "ps_async";
    case Mode::kEc:
      return "ps_ec";
  }
  return "?";
}

absl::StatusOr<Durability> ParseDurability(const std::string& text) {
  Durability d;
  if (text == "every-round") return d;
  if (text == "checkpoint-only") {
    d.kind = Durability::Kind::kCheckpointOnly;
    return d;
  }
  if (absl::StartsWith(text, "every-k:")) {
    int64_t k = 0;
    if (absl::SimpleAtoi(text.substr(8), &k) && k >= 1) {
      d.kind = Durability::Kind::kEveryK;
      d.k = k;
      return d;
    }
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "durability '%s' is not one of every-round, every-k:K (K >= 1), checkpoint-only", text));
}

std::string DurabilityName(const Durability& d) {
  switch (d.kind) {
    case Durability::Kind::kEveryRound:
      return "every-round";
    case Durability::Kind::kEveryK:
      return absl::StrFormat("every-k:%d", d.k);
    case Durability::Kind::kCheckpointOnly:
      return "checkpoint-only";
  }
  return "?";
}

absl::StatusOr<ShardConfig> ShardConfigFromJob(const herd::v1::JobSpec& spec,
                                               const herd::v1::Plan& plan, int shard,
                                               const Durability& durability) {
  ShardConfig c;
  c.job = spec.name();
  c.shard = shard;
  c.workers = spec.workers();
  c.durability = durability;
  const std::string& mode = plan.mode().mode().empty() ? spec.mode().mode() : plan.mode().mode();
  if (mode == "ps_sync") {
    c.mode = Mode::kSync;
  } else if (mode == "ps_async") {
    c.mode = Mode::kAsync;
  } else if (mode == "ps_ec") {
    c.mode = Mode::kEc;
  } else {
    return absl::InvalidArgumentError(absl::StrFormat(
        "job '%s' runs mode '%s'; a parameter server serves ps_sync, ps_async and ps_ec only",
        spec.name(), mode));
  }
  if (c.workers < 1) {
    return absl::InvalidArgumentError(absl::StrFormat("job '%s' has no workers", spec.name()));
  }
  const auto& ms = plan.mode().mode().empty() ? spec.mode() : plan.mode();
  // job.proto: a negative staleness (-1) means no bound.
  if (ms.has_staleness()) {
    c.staleness = ms.staleness() < 0 ? ShardConfig::kInfiniteStaleness : ms.staleness();
  }
  if (c.mode == Mode::kEc) {
    auto comp =
        compression::ParseCompressor(ms.compressor().empty() ? "minmax_uint8" : ms.compressor());
    if (!comp.ok()) return comp.status();
    // ParseCompressor knows more compressors than ps_ec serves (the scheduler's rule too).
    if (*comp != compression::Compressor::kMinMaxUInt8 && *comp != compression::Compressor::kSign) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "job '%s': compressor '%s' is not served by parameter servers; ps_ec takes "
          "minmax_uint8 or sign",
          spec.name(), compression::CompressorName(*comp)));
    }
    c.compressor = *comp;
  }
  auto kind = ParseOptimizer(spec.optimizer().name());
  if (!kind.ok()) return kind.status();
  c.optimizer.kind = *kind;
  if (spec.optimizer().learning_rate() > 0) {
    c.optimizer.learning_rate = spec.optimizer().learning_rate();
  }
  if (c.optimizer.kind == OptimizerConfig::Kind::kMomentum) {
    c.optimizer.momentum = spec.optimizer().momentum() > 0 ? spec.optimizer().momentum() : 0.9;
  }
  c.optimizer.weight_decay = spec.optimizer().weight_decay();
  for (const auto& t : spec.tensors()) {
    if (t.dtype() != "fp32" && t.dtype() != "float32") {
      return absl::InvalidArgumentError(absl::StrFormat(
          "tensor '%s' is %s; this parameter server holds fp32 tensors only", t.name(), t.dtype()));
    }
  }
  for (const auto& e : plan.shards()) {
    c.keys[KeyId{e.tensor(), e.chunk()}] = KeyPlacement{e.count(), e.server()};
  }
  return c;
}

}  // namespace herd::server
