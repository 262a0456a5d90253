#include "worker/executors/catch_up_adam.h"

#include <cmath>
#include <memory>

#include "checkpoint/state_source.h"
#include "common/status.h"

namespace herd::worker {

CatchUpAdam::CatchUpAdam(optim::OptimizerConfig config, const std::vector<ModelTensor>& tensors)
    : config_(config) {
  for (const ModelTensor& t : tensors) {
    names_.push_back(t.name);
    states_.push_back({t.param, t.count, std::vector<float>(t.count, 0.0f),
                       std::vector<float>(t.count, 0.0f), std::vector<int64_t>(t.count, 0)});
  }
}

void CatchUpAdam::ToStep(int t, std::span<float> delivered, int64_t step) {
  State& s = states_[t];
  const double b1 = config_.beta1, b2 = config_.beta2;
  const float c1 = static_cast<float>(1.0 / (1.0 - std::pow(b1, static_cast<double>(step))));
  const float c2 = static_cast<float>(1.0 / (1.0 - std::pow(b2, static_cast<double>(step))));
  const float lr = static_cast<float>(config_.learning_rate);
  const float wd = static_cast<float>(config_.weight_decay);
  const float eps = static_cast<float>(config_.epsilon);
  for (size_t i = 0; i < s.count; ++i) {
    if (delivered[i] == 0.0f) continue;  // not delivered: no move, the state waits
    const int64_t n = step - s.delivered_at[i];
    const float g = delivered[i] / static_cast<float>(n) + wd * s.param[i];
    const float d1 = static_cast<float>(std::pow(b1, static_cast<double>(n)));
    const float d2 = static_cast<float>(std::pow(b2, static_cast<double>(n)));
    s.m[i] = d1 * s.m[i] + (1.0f - d1) * g;
    s.v[i] = d2 * s.v[i] + (1.0f - d2) * g * g;
    delivered[i] = static_cast<float>(n) * lr * (s.m[i] * c1) / (std::sqrt(s.v[i] * c2) + eps);
    s.delivered_at[i] = step;
  }
}

void CatchUpAdam::ExportState(checkpoint::ProcessState& out) const {
  for (size_t t = 0; t < states_.size(); ++t) {
    const State& s = states_[t];
    const auto total = static_cast<int64_t>(s.count);
    checkpoint::AddExtent(out, StateName("adam_m", names_[t]), total, 0, s.m);
    checkpoint::AddExtent(out, StateName("adam_v", names_[t]), total, 0, s.v);
    std::vector<float> at(s.delivered_at.begin(), s.delivered_at.end());
    checkpoint::AddExtent(out, StateName("adam_delivered_at", names_[t]), total, 0, at);
  }
}

absl::StatusOr<ImportStep> CatchUpAdam::ImportState(const checkpoint::StateSource& from,
                                                    ImportWhere where) {
  auto read = std::make_shared<std::vector<State>>(states_);
  for (size_t t = 0; t < read->size(); ++t) {
    State& s = (*read)[t];
    std::vector<float> m(s.count), v(s.count), at(s.count, 0.0f);
    // Both moments or neither: a half-restored Adam would be worse than a fresh one.
    HERD_ASSIGN_OR_RETURN(
        bool held, ReadState(from, StateName("adam_m", names_[t]), Reshard::kReplicated, where, m));
    if (held) {
      HERD_ASSIGN_OR_RETURN(
          held, ReadState(from, StateName("adam_v", names_[t]), Reshard::kReplicated, where, v));
    }
    if (!held) continue;
    HERD_ASSIGN_OR_RETURN(bool has_at, ReadState(from, StateName("adam_delivered_at", names_[t]),
                                                 Reshard::kReplicated, where, at));
    s.m = std::move(m);
    s.v = std::move(v);
    for (size_t i = 0; i < s.count; ++i) {
      s.delivered_at[i] = has_at ? static_cast<int64_t>(at[i]) : 0;
    }
  }
  return ImportStep([this, read] { states_ = std::move(*read); });
}

}  // namespace herd::worker
