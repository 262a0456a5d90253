#include "worker/local_optimizer.h"

#include <memory>

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
  optim::ApplyOptimizer(config_, std::span<float>(s.param, s.count), grad.first(s.count), s.slot0,
                        s.slot1, ++s.step);
}

namespace {

std::string StepKey(const ModelTensor& t) { return absl::StrCat("step/", t.name); }

}  // namespace

void LocalOptimizer::ExportState(checkpoint::ProcessState& out) const {
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

}  // namespace herd::worker
