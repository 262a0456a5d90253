#include "worker/executors/sparse_executor.h"

#include <memory>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "algorithms/sparse/sparse_allreduce.h"
#include "common/status.h"
#include "plan/modes.h"
#include "worker/executor_state.h"
#include "worker/executors/bucket_reduce_executor.h"
#include "worker/executors/catch_up_adam.h"
#include "worker/executors/density_warmup.h"
#include "worker/fused_buckets.h"

namespace herd::worker {
namespace {

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

// Iterations of the sparse stretch done so far (density_warmup.h): a resumed or switched-to
// sparse mode goes on with the warm-up where it was, not from its start.
constexpr std::string_view kWarmupKey = "density_warmup/iterations";

// B-SAG's state adapts per bucket; a bucket is named after its first tensor in forward order,
// so another fusion layout finds the state of the bucket its first tensor was in. Kept only
// for the same number of teams (the ratio is relative to it).
std::string BsagKey(const ExecutorContext& c, const FusedBuckets& buckets, int b) {
  return absl::StrCat("bsag/", c.tensors[buckets.TensorsOf(b)[0]].name);
}

void ExportBsag(const ExecutorContext& c, const FusedBuckets& buckets,
                const std::vector<sparse::BsagState>& bsag, int teams,
                checkpoint::ProcessState& out) {
  for (int b = 0; b < buckets.buckets(); ++b) {
    const sparse::BsagState& s = bsag[b];
    if (s.direction == 0 && s.ratio == 0) continue;  // never ran
    out.values[BsagKey(c, buckets, b)] =
        absl::StrFormat("%d %.17g %.17g %d", teams, s.ratio, s.step, s.direction);
  }
}

void ImportBsag(const ExecutorContext& c, const FusedBuckets& buckets,
                const checkpoint::StateSource& from, ImportWhere where, int teams,
                std::vector<sparse::BsagState>& bsag) {
  for (int b = 0; b < buckets.buckets(); ++b) {
    std::optional<std::string> text = ReadValue(from, BsagKey(c, buckets, b), where);
    if (!text) continue;
    std::vector<std::string> parts = absl::StrSplit(*text, ' ');
    int saved_teams = 0, direction = 0;
    double ratio = 0, step = 0;
    if (parts.size() != 4 || !absl::SimpleAtoi(parts[0], &saved_teams) ||
        !absl::SimpleAtod(parts[1], &ratio) || !absl::SimpleAtod(parts[2], &step) ||
        !absl::SimpleAtoi(parts[3], &direction) || saved_teams != teams) {
      continue;  // another team count, or not ours: start fresh
    }
    bsag[b].ratio = ratio;
    bsag[b].step = step;
    bsag[b].direction = direction;
  }
}
// Carried across iterations: per bucket the residual (what this rank has not delivered yet)
// and, for B-SAG, its extra top-k state (both per rank); with Adam, its state (the same on every
// rank). ExportState saves them by tensor, so a checkpoint and a mode switch keep them.
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
  // 0: the mode registry's default (plan/modes.h), the one the scheduler documents.
  const plan::ModeInfo* info = plan::FindMode(mode);
  if (info == nullptr) return absl::InvalidArgumentError(absl::StrFormat("no mode %s", mode));
  const double d = density > 0 ? density : info->defaults.density;
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
  r.export_state = [context, state, spardl, teams](const FusedBuckets& buckets, int64_t next,
                                                   checkpoint::ProcessState& out) {
    ExportPlaced(out, "residual", context.tensors, PlacesIn(buckets, context.tensors.size()),
                 state->residuals);
    if (state->first_iteration >= 0) {
      out.values[std::string(kWarmupKey)] = absl::StrCat(next - state->first_iteration);
    }
    if (spardl) ExportBsag(context, buckets, state->bsag, teams, out);
    if (state->adam) state->adam->ExportState(out);
  };
  r.import_state = [context, state, spardl, teams](
                       const FusedBuckets& buckets, const checkpoint::StateSource& from,
                       ImportWhere where) -> absl::StatusOr<ImportStep> {
    HERD_ASSIGN_OR_RETURN(
        ImportStep residuals,
        ImportPlaced(from, "residual", Reshard::kMean, where, context.tensors,
                     PlacesIn(buckets, context.tensors.size()), &state->residuals));
    ImportStep adam = [] {};
    if (state->adam) {
      HERD_ASSIGN_OR_RETURN(adam, state->adam->ImportState(from, where));
    }
    const std::optional<int64_t> warm = ReadIntValue(from, kWarmupKey, where);
    std::vector<sparse::BsagState> bsag = state->bsag;
    if (spardl) ImportBsag(context, buckets, from, where, teams, bsag);
    return ImportStep([=] {
      residuals();
      adam();
      if (warm) state->first_iteration = context.first_iteration - *warm;
      state->bsag = bsag;
    });
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
