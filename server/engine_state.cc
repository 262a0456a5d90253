// Engine::ExportState / ImportState: a shard's keys as topology-free training state
// (engine.h documents the names and the rules). The state is named after the tensors and
// placed at the keys' element ranges, so another shard map reads it back key by key.

#include <algorithm>
#include <functional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "server/engine.h"
#include "server/shard_extents.h"

namespace herd::server {

using checkpoint::ProcessState;
using checkpoint::StateSource;

namespace {

constexpr char kKeysValue[] = "shard/keys";
constexpr char kVersionValue[] = "shard/version";
constexpr char kWorkersValue[] = "shard/workers";

std::string Name(const char* kind, const std::string& tensor) {
  return absl::StrCat(kind, "/", tensor);
}
std::string KeyValue(const char* what, const std::string& tensor, int64_t offset) {
  return absl::StrCat(what, "/", tensor, "@", offset);
}

// Every tensor's full length, from the whole shard map.
std::map<int32_t, int64_t> TensorTotals(const ShardConfig& c) {
  std::map<int32_t, int64_t> totals;
  for (const auto& [key, p] : c.keys) {
    totals[key.tensor] = std::max(totals[key.tensor], p.offset + p.count);
  }
  return totals;
}

// The old shards' state of `name`, else the workers' (a checkpoint of a collective mode holds
// the same names, replicated). false when nobody holds it.
absl::StatusOr<bool> ReadAnywhere(const StateSource& from, const std::vector<SavedKey>& old,
                                  const std::string& tensor, const std::string& name, int64_t total,
                                  int64_t offset, std::span<float> out) {
  HERD_ASSIGN_OR_RETURN(bool held, ReadFromShards(from, old, tensor, name, total, offset, out));
  if (held) return true;
  bool per_rank = false;  // a decentralized mode's models (worker/executor_state.h)
  bool any = false;
  for (int r = 0; r < from.workers(); ++r) {
    any = any || from.Has(checkpoint::WorkerProcess(r), name);
    per_rank = per_rank || from.Value(checkpoint::WorkerProcess(r), "models_per_rank").has_value();
  }
  if (!any) return false;
  // Per-rank models and their slots: the average (a world of -1 is never the exporting one's).
  HERD_RETURN_IF_ERROR(per_rank
                           ? checkpoint::ReadOwnOrAverage(from, name, total, offset, 0, -1, out)
                           : checkpoint::ReadReplicated(from, name, total, offset, out));
  return true;
}

}  // namespace

void Engine::CaptureLocked(const KeyState& ks, KeyId key) {
  KeyCopy copy{ks.version, ks.params, ks.slot0, ks.slot1, ks.epsilon, ks.clocks};
  std::lock_guard<std::mutex> lock(capture_mu_);
  captured_[key] = std::move(copy);
  capture_cv_.notify_all();
}

absl::StatusOr<ProcessState> Engine::ExportState(int64_t version, Deadline deadline) {
  std::lock_guard<std::mutex> one_at_a_time(export_mu_);
  HERD_RETURN_IF_ERROR(Usable());
  auto not_initialised = [&](KeyId key) {
    return absl::FailedPreconditionError(
        absl::StrFormat("shard %d cannot export key %s of job '%s': it has no value yet (InitKeys)",
                        config_.shard, KeyName(key), config_.job));
  };
  std::map<KeyId, KeyCopy> copies;
  if (config_.mode == Mode::kAsync) {
    int64_t highest = 0;
    for (auto& [key, ks] : keys_) {
      std::lock_guard<std::mutex> lock(ks->mu);
      if (!ks->initialized) return not_initialised(key);
      copies[key] = KeyCopy{ks->version, ks->params, ks->slot0, ks->slot1, ks->epsilon, ks->clocks};
      highest = std::max(highest, ks->version);
    }
    return StateOf(copies, highest);
  }

  // ps_sync / ps_ec: every key as of `version`.
  {
    std::lock_guard<std::mutex> lock(capture_mu_);
    captured_.clear();
  }
  capture_version_.store(version);
  struct StopCapture {
    Engine* engine;
    ~StopCapture() {
      engine->capture_version_.store(-1);
      std::lock_guard<std::mutex> lock(engine->capture_mu_);
      engine->captured_.clear();
    }
  } stop{this};
  for (auto& [key, ks] : keys_) {
    std::lock_guard<std::mutex> lock(ks->mu);
    if (!ks->initialized) return not_initialised(key);
    bool captured = false;
    if (ks->version > version) {
      // It may have passed `version` after the capture began: the round that reached it
      // copied it.
      std::lock_guard<std::mutex> capture_lock(capture_mu_);
      captured = captured_.contains(key);
    }
    if (ks->version > version && !captured) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "shard %d cannot export version %d: key %s is already at version %d (the cut was "
          "asked for after the round that passed it)",
          config_.shard, version, KeyName(key), ks->version));
    }
    if (ks->version == version) CaptureLocked(*ks, key);
  }
  std::unique_lock<std::mutex> lock(capture_mu_);
  while (captured_.size() < keys_.size()) {
    HERD_RETURN_IF_ERROR(Usable());
    if (capture_cv_.wait_until(lock, deadline.at()) == std::cv_status::timeout &&
        captured_.size() < keys_.size()) {
      KeyId missing;
      for (const auto& [key, ks] : keys_) {
        if (!captured_.contains(key)) {
          missing = key;
          break;
        }
      }
      return absl::DeadlineExceededError(absl::StrFormat(
          "shard %d: key %s did not reach version %d in time for the export (%d of %d keys did)",
          config_.shard, KeyName(missing), version, captured_.size(), keys_.size()));
    }
  }
  copies = std::move(captured_);
  captured_.clear();
  return StateOf(copies, version);
}

ProcessState Engine::StateOf(const std::map<KeyId, KeyCopy>& copies, int64_t version) const {
  ProcessState out;
  out.process = ShardProcess(config_.shard);
  out.values["shard/mode"] = ModeName(config_.mode);
  out.values[kWorkersValue] = absl::StrCat(config_.workers);
  out.values[kVersionValue] = absl::StrCat(version);
  const std::map<int32_t, int64_t> totals = TensorTotals(config_);
  // ps_ec's shards run no optimizer (the workers do, and save its slots under the same names).
  const int slots = config_.mode == Mode::kEc ? 0 : OptimizerSlots(config_.optimizer.kind);
  std::vector<std::string> lines;
  for (const auto& [key, copy] : copies) {
    const KeyPlacement& p = config_.keys.at(key);
    const std::string tensor = TensorNameOf(config_, key.tensor);
    const int64_t total = totals.at(key.tensor);
    lines.push_back(absl::StrCat(tensor, " ", p.offset, " ", p.count));
    if (config_.mode != Mode::kEc) {
      checkpoint::AddExtent(out, Name("param", tensor), total, p.offset, copy.params);
    }
    if (slots >= 1) {
      checkpoint::AddExtent(out, Name(SlotKind(config_.optimizer.kind, 0), tensor), total, p.offset,
                            copy.slot0);
    }
    if (slots >= 2) {
      checkpoint::AddExtent(out, Name(SlotKind(config_.optimizer.kind, 1), tensor), total, p.offset,
                            copy.slot1);
    }
    if (config_.mode == Mode::kEc) {
      checkpoint::AddExtent(out, Name("server_residual", tensor), total, p.offset, copy.epsilon);
    }
    out.values[KeyValue("version", tensor, p.offset)] = absl::StrCat(copy.version);
    if (config_.mode == Mode::kAsync) {
      out.values[KeyValue("clocks", tensor, p.offset)] = absl::StrJoin(copy.clocks, ",");
    }
  }
  out.values[kKeysValue] = absl::StrJoin(lines, "\n");
  return out;
}

absl::Status Engine::ImportState(const StateSource& from) {
  HERD_ASSIGN_OR_RETURN(const std::vector<SavedKey> saved, SavedShardKeys(from));
  // By tensor: each new key looks only at its own tensor's old keys.
  std::map<std::string, std::vector<SavedKey>> saved_by_tensor;
  for (const SavedKey& k : saved) saved_by_tensor[k.tensor].push_back(k);
  const std::map<int32_t, int64_t> totals = TensorTotals(config_);
  const int slots = config_.mode == Mode::kEc ? 0 : OptimizerSlots(config_.optimizer.kind);
  // ps_ec's residual is added to the sum of the workers' pushes, which the workers divide by
  // their count: at another count it must scale with it to add the same to the mean.
  double residual_scale = 1.0;
  if (std::optional<int64_t> old_workers = ShardIntValue(from, 0, kWorkersValue);
      old_workers && *old_workers > 0) {
    residual_scale = static_cast<double>(config_.workers) / static_cast<double>(*old_workers);
  }
  const std::optional<int64_t> shard_version = ShardIntValue(from, 0, kVersionValue);
  // A ps_async key's version counts every push; in ps_sync and ps_ec it is the round, which
  // the workers count too (ps_ec's from their own "ps/version", absent from a ps_async
  // checkpoint): from ps_async into a round-numbered mode, rounds start again at 0.
  const bool restart_rounds = config_.mode != Mode::kAsync &&
                              from.Value(ShardProcess(0), "shard/mode") == ModeName(Mode::kAsync);

  // Everything is read first; the keys change only once all of it was.
  std::map<KeyId, KeyCopy> read;
  for (const auto& [key, ks] : keys_) {
    const KeyPlacement& p = config_.keys.at(key);
    const std::string tensor = TensorNameOf(config_, key.tensor);
    const int64_t total = totals.at(key.tensor);
    const std::vector<SavedKey>& old = saved_by_tensor[tensor];
    KeyCopy c{0, std::vector<float>(p.count, 0.0f), ks->slot0, ks->slot1, ks->epsilon, ks->clocks};
    auto fill = [&](const std::string& name, std::vector<float>& into) -> absl::StatusOr<bool> {
      std::vector<float> values(into.size(), 0.0f);
      HERD_ASSIGN_OR_RETURN(bool held,
                            ReadAnywhere(from, old, tensor, name, total, p.offset, values));
      into = held ? std::move(values) : std::vector<float>(into.size(), 0.0f);
      return held;
    };
    HERD_ASSIGN_OR_RETURN(bool has_params, fill(Name("param", tensor), c.params));
    if (!has_params && config_.mode != Mode::kEc) {
      return absl::NotFoundError(absl::StrFormat(
          "the state holds no parameters of tensor '%s' (elements [%d, %d)) for shard %d's key %s",
          tensor, p.offset, p.offset + p.count, config_.shard, KeyName(key)));
    }
    if (slots >= 1) {
      HERD_RETURN_IF_ERROR(
          fill(Name(SlotKind(config_.optimizer.kind, 0), tensor), c.slot0).status());
    }
    if (slots >= 2) {
      HERD_RETURN_IF_ERROR(
          fill(Name(SlotKind(config_.optimizer.kind, 1), tensor), c.slot1).status());
    }
    if (config_.mode == Mode::kEc) {
      HERD_ASSIGN_OR_RETURN(
          bool held, ReadFromShards(from, old, tensor, Name("server_residual", tensor), total,
                                    p.offset, c.epsilon));
      if (!held) std::fill(c.epsilon.begin(), c.epsilon.end(), 0.0f);
      if (residual_scale != 1.0) {
        for (float& e : c.epsilon) e = static_cast<float>(e * residual_scale);
      }
    }
    // The version: the old key's that held this key's first element (ps_sync and ps_ec: the
    // same for every key), else the shards' export version, else 0.
    c.version = shard_version.value_or(0);
    for (const SavedKey& k : old) {
      if (k.tensor == tensor && k.offset <= p.offset && p.offset < k.offset + k.count) {
        c.version =
            ShardIntValue(from, k.shard, KeyValue("version", tensor, k.offset)).value_or(c.version);
        break;
      }
    }
    if (restart_rounds) c.version = 0;
    std::fill(c.clocks.begin(), c.clocks.end(), 0);
    read.emplace(key, std::move(c));
  }

  for (auto& [key, ks] : keys_) {
    KeyCopy& c = read.at(key);
    std::lock_guard<std::mutex> lock(ks->mu);
    ks->params = std::move(c.params);
    ks->slot0 = std::move(c.slot0);
    ks->slot1 = std::move(c.slot1);
    ks->epsilon = std::move(c.epsilon);
    ks->clocks = std::move(c.clocks);
    // The workers' executors restart their clocks at 0 too: no worker is back in a slot.
    std::fill(ks->clock_base.begin(), ks->clock_base.end(), 0);
    std::fill(ks->iteration_offset.begin(), ks->iteration_offset.end(), KeyState::kNoOffset);
    ks->version = c.version;
    ks->result.clear();
    ClearRoundLocked(*ks);
    ks->initialized = true;
    ks->params_durable = false;
    if (config_.durability.kind != Durability::Kind::kCheckpointOnly) {
      HERD_RETURN_IF_ERROR(WriteLocked(*ks, key));
    }
    ks->cv.notify_all();
  }
  return absl::OkStatus();
}

}  // namespace herd::server
