#include "worker/executors/sparse_executor.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "algorithms/sparse/sparse_allreduce.h"
#include "common/status.h"
#include "worker/executors/bucket_reduce_executor.h"
#include "worker/executors/catch_up_adam.h"
#include "worker/executors/density_warmup.h"

namespace herd::worker {
namespace {

constexpr double kDefaultDensity = 0.01;

// The number of SparDL teams the plan asks for, checked against the communicator: the
// algorithm forms teams of consecutive ranks, so the plan's must be those.
absl::StatusOr<int> TeamsOf(const ExecutorContext& c) {
  const int P = c.comm->size();
  if (c.plan.teams_size() == 0) {
    const int teams = c.plan.mode().teams() > 0 ? c.plan.mode().teams() : 1;
    if (P % teams != 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("sparse mode: %d teams do not divide the %d workers", teams, P));
    }
    return teams;
  }
  const int teams = c.plan.teams_size();
  if (P % teams != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("sparse mode: the plan's %d teams do not divide the %d workers", teams, P));
  }
  const int size = P / teams;
  for (int t = 0; t < teams; ++t) {
    const auto& ranks = c.plan.teams(t).ranks();
    bool consecutive = ranks.size() == size;
    for (int i = 0; consecutive && i < size; ++i) consecutive = ranks[i] == t * size + i;
    if (!consecutive) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "sparse mode: plan team %d is not ranks %d..%d (SparDL teams are consecutive ranks)", t,
          t * size, t * size + size - 1));
    }
  }
  return teams;
}

// Carried across iterations: per bucket the residual (what this rank has not delivered yet)
// and, for B-SAG, its extra top-k state (both per rank); with Adam, its state (the same on every
// rank). A mode switch (a new executor) drops them.
struct State {
  std::vector<std::vector<float>> residuals;
  std::vector<sparse::BsagState> bsag;
  std::unique_ptr<CatchUpAdam> adam;         // null: the job's optimizer runs after the reduction
  std::vector<std::vector<int>> tensors_of;  // per bucket, in buffer order
  std::vector<size_t> counts;                // per tensor
  int64_t first_iteration = -1;              // of this stretch, for the warm-up and Adam
};

}  // namespace

absl::StatusOr<std::unique_ptr<Executor>> MakeSparseExecutor(const ExecutorContext& context) {
  const std::string& mode = context.plan.mode().mode();
  if (mode != "sparse" && mode != "topk_allgather") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the sparse executor runs modes sparse and topk_allgather, not '%s'", mode));
  }
  const double density = context.plan.mode().density();
  if (!(density >= 0 && density <= 1)) {  // 0: the default; NaN fails
    return absl::InvalidArgumentError(
        absl::StrFormat("%s mode: density %g is outside (0, 1]", mode, density));
  }
  int teams = 1;
  if (mode == "sparse") {
    HERD_ASSIGN_OR_RETURN(teams, TeamsOf(context));
  }
  const bool spardl = mode == "sparse";
  const double d = density > 0 ? density : kDefaultDensity;
  auto state = std::make_shared<State>();
  if (context.optimizer.kind == optim::OptimizerConfig::Kind::kAdam) {
    state->adam = std::make_unique<CatchUpAdam>(context.optimizer, context.tensors);
  }
  for (const ModelTensor& t : context.tensors) state->counts.push_back(t.count);
  BucketReduction r;
  r.mode = mode;
  r.description =
      spardl ? absl::StrFormat("density %g, %d teams", d, teams) : absl::StrFormat("density %g", d);
  if (state->adam) absl::StrAppend(&r.description, ", catch-up Adam");
  r.reduces_steps = state->adam != nullptr;
  r.prepare = [state](const FusedBuckets& buckets) {
    for (int b = 0; b < buckets.buckets(); ++b) {
      state->residuals.emplace_back(buckets.count(b), 0.0f);
      const std::span<const int> t = buckets.TensorsOf(b);
      state->tensors_of.emplace_back(t.begin(), t.end());
    }
    state->bsag.resize(buckets.buckets());
  };
  r.make_op = [context, state, spardl, d, teams](int b, float* data, size_t count,
                                                 int64_t iteration) {
    if (state->first_iteration < 0) state->first_iteration = iteration;
    sparse::SparseAllReduceOptions o;
    o.comm = context.comm;
    o.tag = static_cast<uint32_t>(b);
    o.timeout = context.timeout;
    o.data = data;
    o.residual = state->residuals[b].data();
    o.count = count;
    o.density = DensityAt(d, iteration - state->first_iteration);
    o.teams = teams;
    o.bsag = &state->bsag[b];
    const int64_t step = iteration - state->first_iteration + 1;
    return std::function<absl::Status()>([o, spardl, state, b, step] {
      HERD_RETURN_IF_ERROR(spardl ? sparse::SparDLAllReduce(o) : sparse::TopkAllGatherAllReduce(o));
      if (state->adam) {
        // The bucket holds the averaged sparse gradient, the same on every rank: make it
        // the step, tensor by tensor.
        float* at = o.data;
        for (int t : state->tensors_of[b]) {
          state->adam->ToStep(t, std::span<float>(at, state->counts[t]), step);
          at += state->counts[t];
        }
      }
      return absl::OkStatus();
    });
  };
  return MakeBucketReduceExecutor(context, std::move(r));
}

}  // namespace herd::worker
