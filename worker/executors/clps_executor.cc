#include "worker/executors/clps_executor.h"

#include "absl/strings/str_format.h"
#include "algorithms/collectives/options.h"
#include "algorithms/compression/compressor.h"
#include "algorithms/lowprec/centralized_low_precision.h"
#include "common/logging.h"
#include "common/splitmix.h"
#include "common/status.h"
#include "worker/executors/bucket_reduce_executor.h"
#include "worker/fused_buckets.h"

namespace herd::worker {

absl::StatusOr<std::unique_ptr<Executor>> MakeClpsExecutor(const ExecutorContext& context) {
  const std::string& name = context.plan.mode().compressor();
  HERD_ASSIGN_OR_RETURN(compression::Compressor compressor,
                        compression::ParseCompressor(name.empty() ? "minmax_uint8" : name));
  // Per bucket, carried across iterations: the sender residual delta and the reducer residual
  // epsilon; one workspace, since the buckets run one after the other on the queue's thread.
  struct State {
    std::vector<std::vector<float>> delta, epsilon;
    lowprec::LowPrecisionWorkspace workspace;
  };
  auto state = std::make_shared<State>();
  BucketReduction r;
  r.mode = "clps";
  r.description = compression::CompressorName(compressor);
  r.prepare = [state](const FusedBuckets& buckets) {
    for (int b = 0; b < buckets.buckets(); ++b) {
      state->delta.emplace_back(buckets.count(b), 0.0f);
      state->epsilon.emplace_back(buckets.count(b), 0.0f);
    }
  };
  // delta is a sender's residual ("residual": the mean at another worker count, as every
  // mode's); epsilon holds, on each rank, only the elements of the chunks it reduces, so at
  // another worker count every rank takes the sum (each element's one owner's value) and
  // reads its new chunks from it.
  //
  // An elastic job's survivor imports only its own commit, taken with P workers, into the
  // executor of the P-1 live ones (docs/elastic.md): its epsilon covers its old chunks, and the
  // chunks' owners changed with P. Each rank keeps the part of its epsilon that lies in the
  // chunks it reduces now and drops the rest: an element that changed owner starts at zero on
  // its new owner (its old owner's value is not sent over; error feedback loses at most the
  // one compression error it held), and no element is ever held by two ranks (a later export
  // at another worker count sums the owners' values).
  r.export_state = [context, state](const FusedBuckets& buckets, int64_t,
                                    checkpoint::ProcessState& out) {
    const auto places = PlacesIn(buckets, context.tensors.size());
    ExportPlaced(out, "residual", context.tensors, places, state->delta);
    ExportPlaced(out, "reducer_residual", context.tensors, places, state->epsilon);
  };
  r.import_state = [context, state](const FusedBuckets& buckets,
                                    const checkpoint::StateSource& from,
                                    ImportWhere where) -> absl::StatusOr<ImportStep> {
    const auto places = PlacesIn(buckets, context.tensors.size());
    const ImportStep keep_own_chunks = [state, where] {
      int64_t dropped = 0;
      for (auto& epsilon : state->epsilon) {
        const size_t begin = collectives::ChunkBegin(epsilon.size(), where.world, where.rank);
        const size_t end = collectives::ChunkBegin(epsilon.size(), where.world, where.rank + 1);
        for (size_t i = 0; i < epsilon.size(); ++i) {
          if ((i < begin || i >= end) && epsilon[i] != 0.0f) {
            epsilon[i] = 0.0f;
            ++dropped;
          }
        }
      }
      if (dropped > 0) {
        Log().info(
            "clps: rank {} of {}: dropped {} values of the imported reducer residual that lie "
            "in chunks another rank reduces",
            where.rank, where.world, dropped);
      }
    };
    return Combine({ImportPlaced(from, "residual", Reshard::kMean, where, context.tensors, places,
                                 &state->delta),
                    ImportPlaced(from, "reducer_residual", Reshard::kSum, where, context.tensors,
                                 places, &state->epsilon),
                    keep_own_chunks});
  };
  r.make_op = [context, state, compressor](int b, float* data, size_t count, int64_t iteration) {
    lowprec::CentralizedLowPrecisionOptions o;
    o.comm = context.comm;
    o.tag = static_cast<uint32_t>(b);
    o.timeout = context.timeout;
    o.data = data;
    o.count = count;
    o.compressor = compressor;
    o.delta = state->delta[b].data();
    o.epsilon = state->epsilon[b].data();
    o.average = true;
    // Stochastic compressors draw from (job seed, iteration, bucket): the same on every rank.
    o.seed = Mix64(context.plan.seed() ^ Mix64(static_cast<uint64_t>(iteration))) + b;
    o.workspace = &state->workspace;
    return std::function<absl::Status()>(
        [o, state] { return lowprec::CentralizedLowPrecisionAllReduce(o); });
  };
  return MakeBucketReduceExecutor(context, std::move(r));
}

}  // namespace herd::worker
