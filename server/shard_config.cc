#include "server/shard_config.h"

#include "server/shard_memory.h"

#include <cmath>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "herd/v1/job.pb.h"
#include "plan/modes.h"

namespace herd::server {

namespace {

plan::ServerEngine EngineOf(Mode mode) {
  switch (mode) {
    case Mode::kSync:
      return plan::ServerEngine::kSync;
    case Mode::kAsync:
      return plan::ServerEngine::kAsync;
    case Mode::kEc:
      return plan::ServerEngine::kErrorCompensated;
  }
  return plan::ServerEngine::kNone;
}

// The shard's engine for a mode of the registry; nullopt when the shards do not serve it.
std::optional<Mode> ModeOf(plan::ServerEngine engine) {
  switch (engine) {
    case plan::ServerEngine::kSync:
      return Mode::kSync;
    case plan::ServerEngine::kAsync:
      return Mode::kAsync;
    case plan::ServerEngine::kErrorCompensated:
      return Mode::kEc;
    case plan::ServerEngine::kNone:
      break;
  }
  return std::nullopt;
}

// "ps_sync, ps_async and ps_ec": the modes the shards serve.
std::string ServedModes() {
  std::vector<std::string_view> names;
  for (const plan::ModeInfo& m : plan::Modes()) {
    if (m.server_engine != plan::ServerEngine::kNone) names.push_back(m.name);
  }
  return plan::JoinForSentence(names);
}

}  // namespace

std::string ModeName(Mode mode) {
  const plan::ModeInfo* m = plan::ModeServedBy(EngineOf(mode));
  return m != nullptr ? std::string(m->name) : "?";
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

std::string TensorNameOf(const ShardConfig& config, int32_t tensor) {
  if (tensor >= 0 && tensor < static_cast<int32_t>(config.tensor_names.size())) {
    return config.tensor_names[tensor];
  }
  return absl::StrFormat("tensor-%d", tensor);
}

absl::StatusOr<ShardConfig> ShardConfigFromJob(const herd::v1::JobSpec& spec,
                                               const herd::v1::Plan& plan, int shard,
                                               const Durability& durability) {
  ShardConfig c;
  c.job = spec.name();
  c.shard = shard;
  c.workers = spec.workers();
  c.elastic = spec.has_elastic();
  c.durability = durability;
  const std::string& mode = plan.mode().mode().empty() ? spec.mode().mode() : plan.mode().mode();
  const plan::ModeInfo* info = plan::FindMode(mode);
  const std::optional<Mode> engine =
      info != nullptr ? ModeOf(info->server_engine) : std::optional<Mode>();
  if (!engine) {
    return absl::InvalidArgumentError(
        absl::StrFormat("job '%s' runs mode '%s'; a parameter server serves %s only", spec.name(),
                        mode, ServedModes()));
  }
  c.mode = *engine;
  if (c.workers < 1) {
    return absl::InvalidArgumentError(absl::StrFormat("job '%s' has no workers", spec.name()));
  }
  const auto& ms = plan.mode().mode().empty() ? spec.mode() : plan.mode();
  // job.proto: a negative staleness (-1) means no bound.
  if (ms.has_staleness()) {
    c.staleness = ms.staleness() < 0 ? ShardConfig::kInfiniteStaleness : ms.staleness();
  }
  if (info->Takes(plan::Param::kCompressor)) {
    const std::string_view chosen =
        ms.compressor().empty() ? info->defaults.compressor : std::string_view(ms.compressor());
    // The registry's rule (the scheduler's too): the shards serve fewer compressors than
    // ParseCompressor knows.
    if (auto st = plan::CheckCompressor(*info, chosen); !st.ok()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("job '%s': %s", spec.name(), std::string(st.message())));
    }
    auto comp = compression::ParseCompressor(chosen);
    if (!comp.ok()) return comp.status();
    c.compressor = *comp;
  }
  auto kind = ParseOptimizer(spec.optimizer().name());
  if (!kind.ok()) return kind.status();
  c.optimizer.kind = *kind;
  // The scheduler validates these too; a shard checks them again because a NaN or infinity
  // here would make every round non-finite (and the spec may come from an older scheduler).
  const auto& opt = spec.optimizer();
  auto bad = [&](const char* field, double v, const char* range) {
    return absl::InvalidArgumentError(absl::StrFormat("job '%s': optimizer %s is %g; it must be %s",
                                                      spec.name(), field, v, range));
  };
  if (!std::isfinite(opt.learning_rate()) || opt.learning_rate() < 0) {
    return bad("learning_rate", opt.learning_rate(), "finite and > 0 (0: the default)");
  }
  if (!std::isfinite(opt.momentum()) || opt.momentum() < 0 || opt.momentum() >= 1) {
    return bad("momentum", opt.momentum(), "in [0, 1)");
  }
  if (!std::isfinite(opt.weight_decay()) || opt.weight_decay() < 0) {
    return bad("weight_decay", opt.weight_decay(), "finite and >= 0");
  }
  if (opt.learning_rate() > 0) c.optimizer.learning_rate = opt.learning_rate();
  if (c.optimizer.kind == OptimizerConfig::Kind::kMomentum) {
    c.optimizer.momentum = opt.momentum() > 0 ? opt.momentum() : 0.9;
  }
  c.optimizer.weight_decay = opt.weight_decay();
  // AdamW is adam with the decay decoupled (the scheduler knows the name adam).
  if (c.optimizer.kind == OptimizerConfig::Kind::kAdam && opt.decoupled_weight_decay()) {
    c.optimizer.kind = OptimizerConfig::Kind::kAdamW;
  }
  if (!std::isfinite(opt.beta1()) || opt.beta1() < 0 || opt.beta1() >= 1) {
    return bad("beta1", opt.beta1(), "in [0, 1) (0: the default 0.9)");
  }
  if (!std::isfinite(opt.beta2()) || opt.beta2() < 0 || opt.beta2() >= 1) {
    return bad("beta2", opt.beta2(), "in [0, 1) (0: the default 0.999)");
  }
  if (!std::isfinite(opt.epsilon()) || opt.epsilon() < 0) {
    return bad("epsilon", opt.epsilon(), "finite and > 0 (0: the default 1e-8)");
  }
  if (opt.beta1() > 0) c.optimizer.beta1 = opt.beta1();
  if (opt.beta2() > 0) c.optimizer.beta2 = opt.beta2();
  if (opt.epsilon() > 0) c.optimizer.epsilon = opt.epsilon();
  for (const auto& t : spec.tensors()) {
    // A torch parameter group's own rate and decay (TensorSpec.lr_scale, weight_decay).
    optim::TensorHyper h;
    if (t.has_lr_scale()) {
      if (!std::isfinite(t.lr_scale()) || t.lr_scale() <= 0) {
        return absl::InvalidArgumentError(
            absl::StrFormat("job '%s': tensor '%s' has lr_scale %g; it must be finite and > 0",
                            spec.name(), t.name(), t.lr_scale()));
      }
      h.lr_scale = t.lr_scale();
    }
    if (t.has_weight_decay()) {
      if (!std::isfinite(t.weight_decay()) || t.weight_decay() < 0) {
        return absl::InvalidArgumentError(
            absl::StrFormat("job '%s': tensor '%s' has weight_decay %g; it must be finite and >= 0",
                            spec.name(), t.name(), t.weight_decay()));
      }
      h.weight_decay = t.weight_decay();
    }
    c.tensor_hyper.push_back(h);
    c.tensor_names.push_back(t.name());
    if (t.dtype() != "fp32" && t.dtype() != "float32") {
      return absl::InvalidArgumentError(absl::StrFormat(
          "tensor '%s' is %s; this parameter server holds fp32 tensors only", t.name(), t.dtype()));
    }
  }
  for (const auto& e : plan.shards()) {
    c.keys[KeyId{e.tensor(), e.chunk()}] = KeyPlacement{e.count(), e.server(), e.offset()};
  }
  // Before the engine allocates it: a key range this shard cannot hold is refused.
  if (auto st = CheckShardFits(c); !st.ok()) return st;
  return c;
}

}  // namespace herd::server
