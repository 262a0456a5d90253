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
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "bench/peers/peer_layout.h"
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
constexpr uint32_t kReportTag = 0xbe;
constexpr uint32_t kBarrierTag = 0xba;

// c = a + b for bf16 with herd's kernel; Gloo may pass c == a or c == b.
void Bf16Sum(void* c, const void* a, const void* b, size_t n) {
  if (c != a && c != b) std::memcpy(c, a, n * 2);
  ReduceInto(DType::kBFloat16, ReduceOp::kSum, c, c == b ? a : b, n);
}

// One iteration of `op` on `count` elements of type T (uint16_t: bf16 as raw words).
template <typename T>
std::function<void()> Call(const std::shared_ptr<gloo::Context>& ctx, BenchOp op, size_t count,
                           T* data, T* out, std::chrono::milliseconds timeout) {
  ReduceFn sum = Bf16Sum;
  if constexpr (!std::is_same_v<T, uint16_t>) {
    sum = [](void* c, const void* a, const void* b, size_t n) { gloo::sum<T>(c, a, b, n); };
  }
  auto with = [=](auto o) {
    o.setOutput(data, count);
    o.setTimeout(timeout);
    return o;
  };
  switch (op) {
    case BenchOp::kAllReduce:
      return [=] {
        auto o = with(gloo::AllreduceOptions(ctx));
        o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
        o.setReduceFunction(sum);
        gloo::allreduce(o);
      };
    case BenchOp::kAllGather:
      // No input buffer: in place, this rank's block already in its slot of the output.
      return [=] {
        auto o = with(gloo::AllgatherOptions(ctx));
        gloo::allgather(o);
      };
    case BenchOp::kReduceScatter:
      if constexpr (!std::is_same_v<T, uint16_t>) {
        // An old-style algorithm object: set up once (it registers its buffers), run many.
        std::vector<int> elems(ctx->size, static_cast<int>(count / ctx->size));
        auto rs = std::make_shared<gloo::ReduceScatterHalvingDoubling<T>>(
            ctx, std::vector<T*>{data}, static_cast<int>(count), elems);
        return [rs] { rs->run(); };
      }
      return [] {};  // bf16: not measured (Peer::why_not)
    case BenchOp::kBroadcast:
      return [=] {
        auto o = with(gloo::BroadcastOptions(ctx));
        o.setRoot(0);
        gloo::broadcast(o);
      };
    case BenchOp::kReduce:
      return [=] {
        auto o = with(gloo::ReduceOptions(ctx));
        o.setRoot(0);
        o.setReduceFunction(sum);
        gloo::reduce(o);
      };
    case BenchOp::kAllToAll:
      return [=] {
        auto o = with(gloo::AlltoallOptions(ctx));
        o.setInput(data, count);
        o.setOutput(out, count);
        gloo::alltoall(o);
      };
  }
  return [] {};
}

void Run(const SweepSpec& spec, const std::shared_ptr<gloo::Context>& ctx) {
  Peer peer{"gloo", ctx->rank, ctx->size};
  peer.algo = [](BenchOp op) -> std::string {
    if (op == BenchOp::kAllReduce || op == BenchOp::kAllGather) return "ring";
    return op == BenchOp::kReduceScatter ? "halving_doubling" : "gloo";
  };
  peer.why_not = [&](BenchOp op, size_t count) -> std::string {
    if (count == 0) return "fewer elements than ranks";
    if (op != BenchOp::kReduceScatter) return "";
    if (spec.dtype == DType::kBFloat16) return "Gloo's reduce-scatter has no bf16 reduction";
    return count > static_cast<size_t>(INT_MAX) ? "Gloo's reduce-scatter counts in int" : "";
  };
  peer.call = [&](BenchOp op, size_t count, void* data, void* out) {
    switch (spec.dtype) {  // Gloo's templates need the C++ type
      case DType::kFloat32:
        return Call(ctx, op, count, static_cast<float*>(data), static_cast<float*>(out),
                    spec.timeout);
      case DType::kFloat64:
        return Call(ctx, op, count, static_cast<double*>(data), static_cast<double*>(out),
                    spec.timeout);
      case DType::kFloat16:
        return Call(ctx, op, count, static_cast<gloo::float16*>(data),
                    static_cast<gloo::float16*>(out), spec.timeout);
      default:
        return Call(ctx, op, count, static_cast<uint16_t*>(data), static_cast<uint16_t*>(out),
                    spec.timeout);
    }
  };
  peer.barrier = [&] {
    gloo::BarrierOptions o(ctx);
    o.setTag(kBarrierTag);
    gloo::barrier(o);
  };
  // Every rank's report to every rank (Gloo's allgather of raw bytes); rank 0 prints.
  peer.gather = [&](const RankReport& mine) {
    std::vector<RankReport> all(ctx->size);
    std::memcpy(&all[ctx->rank], &mine, sizeof mine);
    gloo::AllgatherOptions gather(ctx);
    gather.setOutput(reinterpret_cast<uint8_t*>(all.data()), all.size() * sizeof(RankReport));
    gather.setTag(kReportTag);
    gloo::allgather(gather);
    return all;
  };
  RunPeerSweep(spec, peer);
}

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
    herd::bench::Run(*spec, ctx);
  } catch (const std::exception& e) {
    // gloo::Exception and its IoException/EnforceNotMet derive from std::runtime_error.
    std::fprintf(stderr, "gloo rank %d: %s\n", flags.rank, e.what());
    return 1;
  }
  return 0;
}
