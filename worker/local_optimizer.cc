#include "worker/local_optimizer.h"

#include <algorithm>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "server/shard_extents.h"

namespace herd::worker {

LocalOptimizer::LocalOptimizer(optim::OptimizerConfig config,
                               const std::vector<ModelTensor>& tensors)
    : config_(config), tensors_(tensors) {
  const int slots = optim::OptimizerSlots(config.kind);
  for (const ModelTensor& t : tensors) {
    State s{t.param, t.count, {}, {}, 0};
    if (slots >= 1) s.slot0.assign(t.count, 0.0f);
    if (slots >= 2) s.slot1.assign(t.count, 0.0f);
    states_.push_back(std::move(s));
  }
}

void LocalOptimizer::Step(int t, std::span<const float> grad) {
  State& s = states_[t];
  if (config_.kind == optim::OptimizerConfig::Kind::kExternal) {
    // The program applies the update (the Python front end's torch optimizer).
    if (config_.external) config_.external->Deliver(t, grad.first(s.count));
    return;
  }
  if (config_.learning_rate_source) config_.learning_rate = config_.learning_rate_source->load();
  optim::ApplyOptimizer(config_, std::span<float>(s.param, s.count), grad.first(s.count), s.slot0,
                        s.slot1, ++s.step);
}

namespace {

std::string StepKey(const ModelTensor& t) { return absl::StrCat("step/", t.name); }

}  // namespace

void LocalOptimizer::ExportState(checkpoint::ProcessState& out) const {
  if (config_.kind == optim::OptimizerConfig::Kind::kExternal) return ExportExternal(out);
  const int slots = optim::OptimizerSlots(config_.kind);
  if (slots == 0) return;
  for (size_t t = 0; t < states_.size(); ++t) {
    const State& s = states_[t];
    const auto total = static_cast<int64_t>(s.count);
    checkpoint::AddExtent(out, StateName(optim::SlotKind(config_.kind, 0), tensors_[t].name), total,
                          0, s.slot0);
    if (slots >= 2) {
      checkpoint::AddExtent(out, StateName(optim::SlotKind(config_.kind, 1), tensors_[t].name),
                            total, 0, s.slot1);
    }
    out.values[StepKey(tensors_[t])] = absl::StrCat(s.step);
  }
}

absl::StatusOr<ImportStep> LocalOptimizer::ImportState(const checkpoint::StateSource& from,
                                                       Reshard rule, ImportWhere where) {
  if (config_.kind == optim::OptimizerConfig::Kind::kExternal) {
    return ImportExternal(from, rule, where);
  }
  const int slots = optim::OptimizerSlots(config_.kind);
  auto read = std::make_shared<std::vector<State>>(states_);
  for (size_t t = 0; t < read->size(); ++t) {
    State& s = (*read)[t];
    if (slots == 0) continue;
    // Both slots or neither: a half-restored Adam would be worse than a fresh one.
    std::vector<float> slot0(s.count, 0.0f), slot1(slots >= 2 ? s.count : 0, 0.0f);
    HERD_ASSIGN_OR_RETURN(
        bool held, ReadState(from, StateName(optim::SlotKind(config_.kind, 0), tensors_[t].name),
                             rule, where, slot0));
    if (held && slots >= 2) {
      HERD_ASSIGN_OR_RETURN(
          held, ReadState(from, StateName(optim::SlotKind(config_.kind, 1), tensors_[t].name), rule,
                          where, slot1));
    }
    if (!held) continue;
    s.slot0 = std::move(slot0);
    s.slot1 = std::move(slot1);
    // Slots the parameter-server shards kept come without a step: theirs is their version.
    s.step = ReadIntValue(from, StepKey(tensors_[t]), where)
                 .value_or(server::ShardIntValue(from, 0, "shard/version").value_or(0));
  }
  return ImportStep([this, read] { states_ = std::move(*read); });
}

// The program's optimizer state, under the names herd's own optimizers use, so a checkpoint,
// a mode switch (the shards' momentum, Adam's moments) and an elastic commit carry it.
void LocalOptimizer::ExportExternal(checkpoint::ProcessState& out) const {
  if (!config_.external) return;
  for (const optim::ExternalOptimizer::Slot& slot : config_.external->Slots()) {
    if (slot.tensor < 0 || slot.tensor >= static_cast<int>(tensors_.size())) continue;
    if (slot.kind == "step") {
      if (slot.count > 0) {
        out.values[StepKey(tensors_[slot.tensor])] =
            absl::StrCat(static_cast<int64_t>(slot.values[0]));
      }
      continue;
    }
    checkpoint::AddExtent(out, StateName(slot.kind, tensors_[slot.tensor].name),
                          static_cast<int64_t>(slot.count), 0,
                          std::span<const float>(slot.values, slot.count));
  }
}

absl::StatusOr<ImportStep> LocalOptimizer::ImportExternal(const checkpoint::StateSource& from,
                                                          Reshard rule, ImportWhere where) {
  if (!config_.external) return ImportStep([] {});
  std::vector<optim::ExternalOptimizer::Slot> slots = config_.external->Slots();
  // Per tensor, every slot or none (a half-restored Adam would be worse than a fresh one).
  std::vector<std::vector<float>> read(slots.size());
  std::vector<bool> held(tensors_.size(), true), any(tensors_.size(), false);
  for (size_t i = 0; i < slots.size(); ++i) {
    const auto& slot = slots[i];
    if (slot.tensor < 0 || slot.tensor >= static_cast<int>(tensors_.size()) ||
        slot.kind == "step") {
      continue;
    }
    read[i].assign(slot.count, 0.0f);
    HERD_ASSIGN_OR_RETURN(
        bool got,
        ReadState(from, StateName(slot.kind, tensors_[slot.tensor].name), rule, where, read[i]));
    held[slot.tensor] = held[slot.tensor] && got;
    any[slot.tensor] = true;
  }
  std::vector<std::optional<int64_t>> steps(tensors_.size());
  for (size_t t = 0; t < tensors_.size(); ++t) {
    steps[t] = ReadIntValue(from, StepKey(tensors_[t]), where);
    // Slots the parameter-server shards kept come without a step: theirs is their version.
    if (!steps[t]) steps[t] = server::ShardIntValue(from, 0, "shard/version");
  }
  return ImportStep(
      [slots = std::move(slots), read = std::move(read), held, any, steps = std::move(steps)] {
        for (size_t i = 0; i < slots.size(); ++i) {
          const auto& slot = slots[i];
          if (slot.tensor < 0 || static_cast<size_t>(slot.tensor) >= held.size()) continue;
          if (!any[slot.tensor] || !held[slot.tensor]) continue;
          if (slot.kind == "step") {
            if (slot.count > 0 && steps[slot.tensor]) {
              slot.values[0] = static_cast<float>(*steps[slot.tensor]);
            }
            continue;
          }
          std::copy(read[i].begin(), read[i].end(), slot.values);
        }
      });
}

}  // namespace herd::worker
