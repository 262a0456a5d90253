#include "bench/peers/peer_layout.h"

#include <CLI/CLI.hpp>

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
    app.add_option("--store-dir", store_dir, "rendezvous directory (shared by all ranks)")
        ->required();
  }
}

}  // namespace herd::bench
