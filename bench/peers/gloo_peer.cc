// herd-bench-gloo: Gloo's collectives in the layout of `herd bench collectives`. The driver
// starts N of these; they meet through Gloo's file store in the driver's temp directory and
// talk over Gloo's TCP device on 127.0.0.1. Rank 0 prints one result JSON line per measurement.
//
// Ops: allreduce with Gloo's ring algorithm (AllreduceOptions::RING), allgather (ring), the
// halving-doubling reduce-scatter (Gloo's only one, ReduceScatterHalvingDoubling), broadcast,
// reduce (root 0) and alltoall. Element types: float, double and gloo::float16 with Gloo's own
// sum; bf16 (which Gloo has no type for) as 16-bit words reduced with herd's kernel, where the
// API takes a reduce function (allreduce, reduce) and reported as not measured elsewhere.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_format.h"
#include "bench/pattern.h"
#include "bench/peers/peer_layout.h"
#include "bench/report.h"
#include "common/deadline.h"
#include "common/reduce.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/alltoall.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/common/error.h"
#include "gloo/math.h"
#include "gloo/reduce.h"
#include "gloo/reduce_scatter.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/transport/tcp/device.h"

namespace herd::bench {
namespace {

using ReduceFn = std::function<void(void*, const void*, const void*, size_t)>;

// c = a + b for bf16 with herd's kernel; Gloo may pass c == a or c == b.
ReduceFn Bf16Sum() {
  return [](void* c, const void* a, const void* b, size_t n) {
    if (c == a) {
      ReduceInto(DType::kBFloat16, ReduceOp::kSum, c, b, n);
    } else if (c == b) {
      ReduceInto(DType::kBFloat16, ReduceOp::kSum, c, a, n);
    } else {
      std::memcpy(c, a, n * 2);
      ReduceInto(DType::kBFloat16, ReduceOp::kSum, c, b, n);
    }
  };
}

std::string_view GlooAlgo(BenchOp op) {
  switch (op) {
    case BenchOp::kAllReduce:
    case BenchOp::kAllGather:
      return "ring";
    case BenchOp::kReduceScatter:
      return "halving_doubling";
    default:
      return "gloo";
  }
}

class GlooSweep {
 public:
  GlooSweep(const SweepSpec& spec, std::shared_ptr<gloo::Context> ctx)
      : spec_(spec), ctx_(std::move(ctx)), rank_(ctx_->rank), ranks_(ctx_->size) {}

  void Run() {
    const size_t esize = DTypeSize(spec_.dtype);
    size_t max_count = 0;
    for (size_t s : spec_.sizes) max_count = std::max(max_count, ElementCount(s, spec_.dtype));
    data_.assign(max_count * esize, std::byte{0});
    for (BenchOp op : spec_.ops) {
      if (op == BenchOp::kAllToAll) out_.assign(max_count * esize, std::byte{0});
    }
    for (BenchOp op : spec_.ops) {
      for (size_t requested : spec_.sizes) Measure(op, requested);
    }
  }

 private:
  // Dispatches on the element type: Gloo's templates need the C++ type.
  template <typename Fn>
  void Typed(Fn&& fn) {
    switch (spec_.dtype) {
      case DType::kFloat32:
        return fn(float{});
      case DType::kFloat64:
        return fn(double{});
      case DType::kFloat16:
        return fn(gloo::float16{});
      default:
        return fn(uint16_t{});  // bf16 as raw words
    }
  }

  void Measure(BenchOp op, size_t requested) {
    const std::string algo(GlooAlgo(op));
    const size_t count = PeerElementCount(op, requested, spec_.dtype, ranks_);
    std::string why_not;
    if (count == 0) why_not = "fewer elements than ranks";
    if (spec_.dtype == DType::kBFloat16 && op == BenchOp::kReduceScatter) {
      why_not = "Gloo's reduce-scatter has no bf16 reduction";
    }
    if (op == BenchOp::kReduceScatter && count > static_cast<size_t>(INT_MAX)) {
      why_not = "Gloo's reduce-scatter counts in int";
    }
    if (!why_not.empty()) {
      if (rank_ == 0) {
        Print(MakeUnmeasured("gloo", op, algo, ranks_, requested,
                             std::string(DTypeName(spec_.dtype)), why_not));
      }
      return;
    }
    const int iters = IterationsFor(spec_, requested);
    const int warmup = WarmupFor(spec_, requested);
    std::function<void()> call = Prepare(op, count);

    RankReport report;
    if (spec_.check) {
      PrepareHerdInputs(op, spec_.dtype, ranks_, rank_, count, data_.data(), out_.data());
      call();
      auto bad =
          VerifyPeerOutputs(op, spec_.dtype, ranks_, rank_, count, data_.data(), out_.data());
      report.checked = 1;
      report.check_ok = bad ? 0 : 1;
      if (bad) {
        report.bad_index = bad->index;
        report.got = bad->got;
        report.expected = bad->expected;
      }
    }
    for (int i = 0; i < warmup; ++i) call();
    Barrier();
    const auto start = Clock::now();
    for (int i = 0; i < iters; ++i) call();
    report.seconds_per_iter = std::chrono::duration<double>(Clock::now() - start).count() / iters;

    // Every rank's report to every rank (Gloo's allgather of raw bytes); rank 0 prints.
    std::vector<RankReport> all(ranks_);
    std::memcpy(&all[rank_], &report, sizeof report);
    gloo::AllgatherOptions gather(ctx_);
    gather.setOutput(reinterpret_cast<uint8_t*>(all.data()), all.size() * sizeof(RankReport));
    gather.setTag(kReportTag);
    gloo::allgather(gather);
    if (rank_ == 0) {
      Print(Summarise(
          Measurement{"gloo", op, algo, spec_.dtype, count, requested, iters, spec_.check}, all));
    }
  }

  // Builds the call for one measurement; the returned function runs one iteration in place.
  std::function<void()> Prepare(BenchOp op, size_t count) {
    std::function<void()> call;
    Typed([&](auto tag) {
      using T = decltype(tag);
      T* data = reinterpret_cast<T*>(data_.data());
      T* out = reinterpret_cast<T*>(out_.data());
      ReduceFn sum;
      if constexpr (std::is_same_v<T, uint16_t>) {
        sum = Bf16Sum();
      } else {
        sum = [](void* c, const void* a, const void* b, size_t n) { gloo::sum<T>(c, a, b, n); };
      }
      const auto timeout = spec_.timeout;
      switch (op) {
        case BenchOp::kAllReduce:
          call = [=, ctx = ctx_] {
            gloo::AllreduceOptions o(ctx);
            o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
            o.setOutput(data, count);
            o.setReduceFunction(sum);
            o.setTimeout(timeout);
            gloo::allreduce(o);
          };
          return;
        case BenchOp::kAllGather:
          // No input buffer: in place, this rank's block already in its slot of the output.
          call = [=, ctx = ctx_] {
            gloo::AllgatherOptions o(ctx);
            o.setOutput(data, count);
            o.setTimeout(timeout);
            gloo::allgather(o);
          };
          return;
        case BenchOp::kReduceScatter:
          if constexpr (!std::is_same_v<T, uint16_t>) {
            // An old-style algorithm object: set up once (it registers its buffers), run many.
            std::vector<int> elems(ranks_, static_cast<int>(count / ranks_));
            auto rs = std::make_shared<gloo::ReduceScatterHalvingDoubling<T>>(
                ctx_, std::vector<T*>{data}, static_cast<int>(count), elems);
            call = [rs] { rs->run(); };
          }
          return;
        case BenchOp::kBroadcast:
          call = [=, ctx = ctx_] {
            gloo::BroadcastOptions o(ctx);
            o.setRoot(0);
            o.setOutput(data, count);
            o.setTimeout(timeout);
            gloo::broadcast(o);
          };
          return;
        case BenchOp::kReduce:
          call = [=, ctx = ctx_] {
            gloo::ReduceOptions o(ctx);
            o.setRoot(0);
            o.setOutput(data, count);
            o.setReduceFunction(sum);
            o.setTimeout(timeout);
            gloo::reduce(o);
          };
          return;
        case BenchOp::kAllToAll:
          call = [=, ctx = ctx_] {
            gloo::AlltoallOptions o(ctx);
            o.setInput(data, count);
            o.setOutput(out, count);
            o.setTimeout(timeout);
            gloo::alltoall(o);
          };
          return;
      }
    });
    return call;
  }

  void Barrier() {
    gloo::BarrierOptions o(ctx_);
    o.setTag(kBarrierTag);
    gloo::barrier(o);
  }

  static void Print(const BenchResult& r) {
    std::printf("%s\n", ToJsonLine(r).c_str());
    std::fflush(stdout);
  }

  static constexpr uint32_t kReportTag = 0xbe;
  static constexpr uint32_t kBarrierTag = 0xba;
  const SweepSpec& spec_;
  std::shared_ptr<gloo::Context> ctx_;
  const int rank_, ranks_;
  std::vector<std::byte> data_, out_;
};

}  // namespace
}  // namespace herd::bench

int main(int argc, char** argv) {
  CLI::App app{"herd-bench-gloo: Gloo peer of herd bench collectives (started by it)"};
  herd::bench::PeerFlags flags;
  flags.Register(app, /*with_rendezvous=*/true);
  CLI11_PARSE(app, argc, argv);
  auto spec = flags.sweep.ToSpec();
  if (!spec.ok()) {
    std::fprintf(stderr, "herd-bench-gloo: %s\n", spec.status().ToString().c_str());
    return 2;
  }
  if (flags.rank < 0 || flags.rank >= flags.ranks) {
    std::fprintf(stderr, "herd-bench-gloo: --rank must be in [0, --ranks)\n");
    return 2;
  }
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    auto device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(flags.store_dir);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(flags.rank, flags.ranks);
    ctx->setTimeout(spec->timeout);
    ctx->connectFullMesh(store, device);
    herd::bench::GlooSweep(*spec, ctx).Run();
  } catch (const std::exception& e) {
    // gloo::Exception and its IoException/EnforceNotMet derive from std::runtime_error.
    std::fprintf(stderr, "gloo rank %d: %s\n", flags.rank, e.what());
    return 1;
  }
  return 0;
}
