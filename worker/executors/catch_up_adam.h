#pragma once
// Adam for the sparse modes: the step each delivered element would have taken over the
// iterations its delivery covers (docs/sparse.md, "In training: Adam that catches up").
//
// Error feedback delivers an element only now and then: what it delivers at iteration t is the
// sum G of the mean gradients of the n iterations since its last delivery (n = 1 for an element
// delivered every iteration). SGD and momentum are linear, so applying them to G at once moves
// the parameter as far as the n separate gradients would have; Adam is not: it normalises each
// value by its running magnitude, so one burst G followed by zeros moves the element (for a steady
// gradient) about sqrt(n) times less than n iterations of dense Adam, and rarely delivered elements
// (the many small gradients a top-k of 1 % keeps back) barely train. Here an element moves only
// when it is delivered (lazily, like torch's SparseAdam), and then as dense Adam would have moved
// it over those n iterations had its gradient been their mean g = G / n each time:
//   m = b1^n m + (1 - b1^n) g,   v = b2^n v + (1 - b2^n) g^2      (n steps of the averages)
//   step = n lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)   (n steps of the last size)
// With n = 1 for every element (density 1) this is Adam exactly. Every rank computes it from the
// same averaged result, so the replicas stay identical.
//
// State per tensor, the same on every rank (replicated, like a dense mode's optimizer state):
// m and v per element, the iteration of each element's last delivery.

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "algorithms/optim/optimizer.h"
#include "checkpoint/state.h"
#include "checkpoint/state_source.h"
#include "worker/executor.h"
#include "worker/executor_state.h"

namespace herd::worker {

class CatchUpAdam {
 public:
  // `config.kind` must be adam; `tensors` are the model's, read for weight decay.
  CatchUpAdam(optim::OptimizerConfig config, const std::vector<ModelTensor>& tensors);

  // Tensor `t`'s averaged sparse gradient `delivered` (t's count values; 0 where nothing was
  // delivered) becomes, in place, the step to subtract from its parameters in iteration `step`
  // (1 for the first iteration the state has seen; every call of one iteration passes the same).
  void ToStep(int t, std::span<float> delivered, int64_t step);

  // "adam_m/<t>", "adam_v/<t>" (the names of the dense modes' Adam, so a switch or a resume in
  // another mode keeps the moments) and "adam_delivered_at/<t>" (each element's last delivery
  // step, as fp32: exact up to 2^24 steps of one sparse stretch). Replicated: every rank holds
  // the same values. An import without delivery steps (from a dense mode) counts every element
  // as not delivered in this stretch yet.
  void ExportState(checkpoint::ProcessState& out) const;
  absl::StatusOr<ImportStep> ImportState(const checkpoint::StateSource& from, ImportWhere where);

 private:
  struct State {
    const float* param;
    size_t count;
    std::vector<float> m, v;
    std::vector<int64_t> delivered_at;  // the step of the last delivery; 0: never
  };
  optim::OptimizerConfig config_;
  std::vector<std::string> names_;  // per tensor
  std::vector<State> states_;
};

}  // namespace herd::worker
