#include "bench/peers/peer_layout.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <utility>

namespace herd::bench {

size_t PeerElementCount(BenchOp op, size_t bytes, DType dtype, int ranks) {
  size_t count = ElementCount(bytes, dtype);
  const bool blockwise =
      op == BenchOp::kReduceScatter || op == BenchOp::kAllGather || op == BenchOp::kAllToAll;
  if (blockwise && ranks > 0) count -= count % static_cast<size_t>(ranks);
  return count;
}

std::optional<Mismatch> VerifyPeerOutputs(BenchOp op, DType dtype, int ranks, int rank,
                                          size_t count, const void* data, const void* out) {
  if (op == BenchOp::kReduceScatter) {
    const size_t block = count / static_cast<size_t>(ranks);
    return CheckSum(dtype, data, block, ranks, static_cast<uint64_t>(rank) * block);
  }
  return VerifyHerdOutputs(op, dtype, ranks, rank, count, data, out);
}

void PeerFlags::Register(CLI::App& app, bool with_rendezvous) {
  sweep.Register(app, /*for_users=*/false);
  if (with_rendezvous) {
    app.add_option("--rank", rank, "this process's rank")->required();
    app.add_option("--ranks", ranks, "number of ranks")->required()->check(CLI::Range(1, 65536));
    app.add_option("--store", store_dir, "rendezvous directory (shared by all ranks)")->required();
  }
}

void RunPeerSweep(const SweepSpec& spec, const Peer& peer) {
  const size_t esize = DTypeSize(spec.dtype);
  size_t max_count = 0;
  for (size_t s : spec.sizes) max_count = std::max(max_count, ElementCount(s, spec.dtype));
  // Zero-filled up front so no page fault lands in a timed loop.
  std::vector<std::byte> data(max_count * esize), out;
  if (std::find(spec.ops.begin(), spec.ops.end(), BenchOp::kAllToAll) != spec.ops.end()) {
    out.resize(max_count * esize);
  }
  auto print = [&](const BenchResult& r) {
    if (peer.rank != 0) return;
    std::printf("%s\n", ToJsonLine(r).c_str());
    std::fflush(stdout);
  };
  bool first_point = true;
  for (BenchOp op : spec.ops) {
    for (size_t requested : spec.sizes) {
      const std::string algo = peer.algo(op), dtype(DTypeName(spec.dtype));
      const size_t count = PeerElementCount(op, requested, spec.dtype, peer.ranks);
      if (const std::string why = peer.why_not(op, count); !why.empty()) {
        print(MakeUnmeasured(peer.impl, op, algo, peer.ranks, requested, dtype, why));
        continue;
      }
      const std::function<void()> call = peer.call(op, count, data.data(), out.data());
      PointHooks hooks;
      hooks.call = [&] {
        call();
        return absl::OkStatus();
      };
      hooks.barrier = [&] {
        peer.barrier();
        return absl::OkStatus();
      };
      hooks.prepare = [&] {
        PrepareHerdInputs(op, spec.dtype, peer.ranks, peer.rank, count, data.data(), out.data());
      };
      hooks.verify = [&] {
        return VerifyPeerOutputs(op, spec.dtype, peer.ranks, peer.rank, count, data.data(),
                                 out.data());
      };
      // The peers' libraries report errors by aborting or throwing, never by a status.
      hooks.first_in_process = std::exchange(first_point, false);
      const RankReport report = *MeasurePoint(spec, requested, hooks);
      const std::vector<RankReport> all = peer.gather(report);
      print(Summarise(Measurement{peer.impl, op, algo, spec.dtype, count, requested,
                                  IterationsFor(spec, requested), spec.check},
                      all));
    }
  }
}

}  // namespace herd::bench
