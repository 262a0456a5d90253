#include "bench/herd_sweep.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

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

absl::Status Annotate(const absl::Status& st, std::string_view where) {
  if (st.ok()) return st;
  return absl::Status(st.code(), absl::StrFormat("%s: %s", where, std::string(st.message())));
}

// One collective call of `op` with herd's algorithm `algo` on `count` elements.
class OpRunner {
 public:
  OpRunner(transport::Communicator& comm, const SweepSpec& spec, BenchOp op, coll::Algorithm algo,
           void* data, void* out, size_t count)
      : comm_(comm), spec_(spec), op_(op), algo_(algo), data_(data), out_(out), count_(count) {}

  absl::Status Run() const {
    auto common = [&](coll::CommonOptions& o) {
      o.comm = &comm_;
      o.dtype = spec_.dtype;
      o.tag = 1;
      o.timeout = spec_.timeout;
    };
    switch (op_) {
      case BenchOp::kAllReduce: {
        coll::AllReduceOptions o;
        common(o);
        o.data = data_;
        o.count = count_;
        return coll::AllReduce(o, algo_);
      }
      case BenchOp::kReduceScatter: {
        coll::ReduceScatterOptions o;
        common(o);
        o.data = data_;
        o.count = count_;
        return coll::ReduceScatter(o, algo_);
      }
      case BenchOp::kAllGather: {
        coll::AllGatherOptions o;
        common(o);
        o.data = data_;
        o.count = count_;
        return coll::AllGather(o, algo_);
      }
      case BenchOp::kBroadcast: {
        coll::BroadcastOptions o;
        common(o);
        o.data = data_;
        o.count = count_;
        return coll::Broadcast(o, algo_);
      }
      case BenchOp::kReduce: {
        coll::ReduceOptions o;
        common(o);
        o.data = data_;
        o.count = count_;
        return coll::Reduce(o, algo_);
      }
      case BenchOp::kAllToAll: {
        coll::AllToAllOptions o;
        common(o);
        o.input = data_;
        o.output = out_;
        o.count = count_;
        return coll::PairwiseAllToAll(o);
      }
    }
    return absl::InternalError("unknown benchmark operation");
  }

 private:
  transport::Communicator& comm_;
  const SweepSpec& spec_;
  BenchOp op_;
  coll::Algorithm algo_;
  void* data_;
  void* out_;
  size_t count_;
};

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
      const OpRunner runner(comm, spec, op, algo, data.get(), out.get(), count);
      // Rank 0's heartbeat: one clock read per iteration, a line at most once a second.
      auto last_beat = Clock::now();
      auto beat = [&](const char* phase, int done, int total) {
        if (rank != 0 || !progress) return;
        const auto now = Clock::now();
        if (now - last_beat < std::chrono::seconds(1)) return;
        last_beat = now;
        progress(absl::StrFormat("%s %s %s: %s %d/%d", BenchOpName(op), algo_name,
                                 FormatByteSize(requested), phase, done, total));
      };
      const int iters = IterationsFor(spec, requested);
      const int warmup = WarmupFor(spec, requested);
      RankReport report;

      if (spec.check) {
        PrepareHerdInputs(op, spec.dtype, p, rank, count, data.get(), out.get());
        HERD_RETURN_IF_ERROR(Annotate(Barrier(comm, Deadline::After(spec.timeout)), where));
        HERD_RETURN_IF_ERROR(Annotate(runner.Run(), where));
        auto bad = VerifyHerdOutputs(op, spec.dtype, p, rank, count, data.get(), out.get());
        report.checked = 1;
        report.check_ok = bad ? 0 : 1;
        if (bad) {
          report.bad_index = bad->index;
          report.got = bad->got;
          report.expected = bad->expected;
        }
      }
      for (int i = 0; i < warmup; ++i) {
        HERD_RETURN_IF_ERROR(Annotate(runner.Run(), where));
        beat("warm-up", i + 1, warmup);
      }

      // Every rank starts its clock as it leaves the barrier; the slowest rank's time is the
      // operation's time.
      HERD_RETURN_IF_ERROR(Annotate(Barrier(comm, Deadline::After(spec.timeout)), where));
      comm.reset();
      const auto start = Clock::now();
      for (int i = 0; i < iters; ++i) {
        HERD_RETURN_IF_ERROR(Annotate(runner.Run(), where));
        beat("timed", i + 1, iters);
      }
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      report.seconds_per_iter = seconds / iters;
      report.waited_per_iter = comm.waited_seconds() / iters;

      auto reports = GatherReports(comm, report, Deadline::After(spec.timeout));
      HERD_RETURN_IF_ERROR(Annotate(reports.status(), where));
      if (rank == 0) {
        emit(Summarise(
            Measurement{"herd", op, algo_name, spec.dtype, count, requested, iters, spec.check},
            *reports));
      }
    }
  }
  // Nobody tears its communicator down while a peer may still be sending to it.
  return Annotate(Barrier(comm, Deadline::After(spec.timeout)), "final barrier");
}

}  // namespace herd::bench
