#pragma once
// What the worker runtime trains, seen without torch: a model whose tensors the executors
// update, stepped one mini-batch at a time through an executor, and evaluated on the test set.
// worker/torch/ implements it with libtorch; the runtime (worker/runtime.h) only sees this.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/timeline.h"
#include "herd/v1/job.pb.h"
#include "worker/data/epoch_order.h"
#include "worker/elastic_plan.h"
#include "worker/executor.h"

namespace herd::worker {

struct StepStats {
  double loss = 0;
  double forward_seconds = 0;   // includes the waits of BeforeForward (dear's all-gathers)
  double backward_seconds = 0;  // includes handing gradients to the executor
  int64_t samples = 0;
};

class Trainable {
 public:
  virtual ~Trainable() = default;

  // The model's tensors in forward order, fp32 on the host; addresses stay put.
  virtual const std::vector<ModelTensor>& tensors() const = 0;
  // Their layout as a JobSpec lists it (name, shape, dtype).
  virtual std::vector<herd::v1::TensorSpec> Layout() const = 0;
  // Samples of the whole training set (every worker holds all of them and takes its part of
  // each global batch: worker/data/epoch_order.h).
  virtual int64_t TrainSamples() const = 0;
  // Forward, backward and optimizer step of this worker's part `slice` of the global batch at
  // `at` (Session::DataSlice) through `executor` (BeforeForward before each layer,
  // GradientReady from the gradient hooks, EndBackward as the step). The caller runs
  // BeginIteration before.
  virtual absl::StatusOr<StepStats> Step(Executor& executor, const DataPosition& at,
                                         const BatchSlice& slice) = 0;
  // Accuracy on the test set with the current parameters.
  virtual absl::StatusOr<double> Evaluate() = 0;
  // Where Step draws its forward and backward spans (null: nowhere).
  void set_timeline(Timeline* timeline) { timeline_ = timeline; }

 protected:
  Timeline* timeline_ = nullptr;
};

}  // namespace herd::worker
