#include "bench/herd_sweep.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_format.h"
#include "algorithms/collectives/alltoall.h"
#include "algorithms/collectives/run.h"
#include "bench/pattern.h"
#include "bench/rank_sync.h"
#include "bench/sizes.h"
#include "bench/timed_communicator.h"
#include "common/status.h"

namespace herd::bench {
namespace {

namespace coll = collectives;

// 64-byte aligned and touched once, so page faults never land inside a timed loop.
struct FreeDeleter {
  void operator()(std::byte* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<std::byte[], FreeDeleter>;

absl::StatusOr<Buffer> Allocate(size_t bytes) {
  const size_t rounded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  auto* p = static_cast<std::byte*>(std::aligned_alloc(64, rounded));
  if (p == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("cannot allocate a %u-byte benchmark buffer", bytes));
  }
  std::memset(p, 0, rounded);
  return Buffer(p);
}

// One collective call of `op` with herd's algorithm `algo` on `count` elements, in place.
absl::Status RunOnce(transport::Communicator& comm, const SweepSpec& spec, BenchOp op,
                     coll::Algorithm algo, void* data, void* out, size_t count) {
  auto with = [&](auto o) {
    o.comm = &comm;
    o.dtype = spec.dtype;
    o.tag = 1;
    o.timeout = spec.timeout;
    if constexpr (std::is_same_v<decltype(o), coll::AllToAllOptions>) {
      o.input = data;
      o.output = out;
    } else {
      o.data = data;
    }
    o.count = count;
    return o;
  };
  switch (op) {
    case BenchOp::kAllReduce:
      return coll::AllReduce(with(coll::AllReduceOptions{}), algo);
    case BenchOp::kReduceScatter:
      return coll::ReduceScatter(with(coll::ReduceScatterOptions{}), algo);
    case BenchOp::kAllGather:
      return coll::AllGather(with(coll::AllGatherOptions{}), algo);
    case BenchOp::kBroadcast:
      return coll::Broadcast(with(coll::BroadcastOptions{}), algo);
    case BenchOp::kReduce:
      return coll::Reduce(with(coll::ReduceOptions{}), algo);
    case BenchOp::kAllToAll:
      return coll::PairwiseAllToAll(with(coll::AllToAllOptions{}));
  }
  return absl::InternalError("unknown benchmark operation");
}

}  // namespace

absl::Status RunHerdSweep(transport::Communicator& inner, const SweepSpec& spec,
                          const std::function<void(const BenchResult&)>& emit,
                          const std::function<void(const std::string&)>& progress) {
  HERD_ASSIGN_OR_RETURN(HerdPlan plan, PlanHerdRuns(spec.ops, spec.algos));
  TimedCommunicator comm(inner);
  const int p = comm.size(), rank = comm.rank();
  const size_t esize = DTypeSize(spec.dtype);

  size_t max_count = 0;
  for (size_t s : spec.sizes) max_count = std::max(max_count, ElementCount(s, spec.dtype));
  const bool alltoall = std::any_of(plan.runs.begin(), plan.runs.end(), [](const auto& run) {
    return run.first == BenchOp::kAllToAll;
  });
  HERD_ASSIGN_OR_RETURN(Buffer data, Allocate(max_count * esize));
  Buffer out;
  if (alltoall) {
    const size_t block = coll::ChunkSize(max_count, p, rank);
    HERD_ASSIGN_OR_RETURN(out, Allocate(static_cast<size_t>(p) * block * esize));
  }

  bool first_point = true;
  for (const auto& [op, algo_name] : plan.runs) {
    // alltoall has one algorithm and no dispatcher entry; the others go through run.h.
    coll::Algorithm algo = coll::Algorithm::kPairwise;
    if (op != BenchOp::kAllToAll) {
      HERD_ASSIGN_OR_RETURN(algo, coll::ParseAlgorithm(algo_name));
    }
    for (size_t requested : spec.sizes) {
      const size_t count = ElementCount(requested, spec.dtype);
      const std::string where = absl::StrFormat("herd %s %s %s (rank %d of %d)", BenchOpName(op),
                                                algo_name, FormatByteSize(requested), rank, p);
      auto annotate = [&](const absl::Status& st) {
        if (st.ok()) return st;
        return absl::Status(st.code(), absl::StrFormat("%s: %s", where, std::string(st.message())));
      };
      PointHooks hooks;
      hooks.call = [&] {
        return annotate(RunOnce(comm, spec, op, algo, data.get(), out.get(), count));
      };
      // The wait time counts from the timed loop's barrier on.
      hooks.barrier = [&] {
        absl::Status st = annotate(Barrier(comm, Deadline::After(spec.timeout)));
        comm.reset();
        return st;
      };
      hooks.prepare = [&] {
        PrepareHerdInputs(op, spec.dtype, p, rank, count, data.get(), out.get());
      };
      hooks.verify = [&] {
        return VerifyHerdOutputs(op, spec.dtype, p, rank, count, data.get(), out.get());
      };
      // Rank 0's heartbeat: one clock read per iteration, a line at most once a second.
      auto last_beat = Clock::now();
      hooks.progress = [&](const char* phase, int done, int total) {
        if (rank != 0 || !progress || Clock::now() - last_beat < std::chrono::seconds(1)) return;
        last_beat = Clock::now();
        progress(absl::StrFormat("%s %s %s: %s %d/%d", BenchOpName(op), algo_name,
                                 FormatByteSize(requested), phase, done, total));
      };
      hooks.first_in_process = std::exchange(first_point, false);
      HERD_ASSIGN_OR_RETURN(RankReport report, MeasurePoint(spec, requested, hooks));
      report.waited_per_iter = comm.waited_seconds() / IterationsFor(spec, requested);
      auto reports = GatherToRoot(comm, report, Deadline::After(spec.timeout));
      HERD_RETURN_IF_ERROR(annotate(reports.status()));
      if (rank == 0) {
        emit(Summarise(Measurement{"herd", op, algo_name, spec.dtype, count, requested,
                                   IterationsFor(spec, requested), spec.check},
                       *reports));
      }
    }
  }
  // Nobody tears its communicator down while a peer may still be sending to it.
  const absl::Status st = Barrier(comm, Deadline::After(spec.timeout));
  return st.ok() ? st : absl::Status(st.code(), "final barrier: " + std::string(st.message()));
}

}  // namespace herd::bench
