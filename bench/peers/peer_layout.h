#pragma once
// What the peer programs (herd-bench-mpi, herd-bench-gloo) share: the element count each
// operation runs with, the parse of their command line, and the sweep loop itself.
//
// MPI_Reduce_scatter_block, MPI_Allgather, MPI_Alltoall and Gloo's reduce-scatter, allgather
// and alltoall take equal blocks per rank, so for those the count is rounded down to a multiple
// of the rank count (and `bytes` in the result says what moved). With such a count herd's chunk
// layout is exactly those equal blocks, so the peers fill and verify with bench/pattern.h's
// herd-layout functions, except where a peer puts a result elsewhere (documented there).

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/pattern.h"
#include "bench/result.h"
#include "bench/sweep_spec.h"

namespace CLI {
class App;
}

namespace herd::bench {

// Elements a peer moves for `bytes` requested: whole elements, then for the block-wise
// operations a multiple of `ranks` (possibly 0: the caller reports the row as not measured).
size_t PeerElementCount(BenchOp op, size_t bytes, DType dtype, int ranks);

// VerifyHerdOutputs for the peers' layouts: identical except reduce-scatter, whose result both
// MPI (in place) and Gloo's halving-doubling put at the start of the buffer, not at the rank's
// offset. `count` is a multiple of `ranks` (PeerElementCount).
std::optional<Mismatch> VerifyPeerOutputs(BenchOp op, DType dtype, int ranks, int rank,
                                          size_t count, const void* data, const void* out);

// The flags every peer takes: the sweep flags plus, for peers that start without a launcher,
// --rank, --ranks and --store (the rendezvous directory).
struct PeerFlags {
  SweepFlags sweep;
  int rank = -1;
  int ranks = 0;
  std::string store_dir;
  void Register(CLI::App& app, bool with_rendezvous);
};

// One peer's side of the sweep: its library's calls, barrier and gather.
struct Peer {
  std::string impl;  // "mpi", "gloo"
  int rank = 0, ranks = 1;
  // The peer's name for the algorithm of `op` ("MPI_Allreduce", "ring").
  std::function<std::string(BenchOp op)> algo{};
  // Why (op, count) cannot run, or "".
  std::function<std::string(BenchOp op, size_t count)> why_not{};
  // One in-place call of `op` on `count` elements of data (alltoall: into out).
  std::function<std::function<void()>(BenchOp op, size_t count, void* data, void* out)> call{};
  std::function<void()> barrier{};
  // Every rank's report, on rank 0 (index = rank).
  std::function<std::vector<RankReport>(const RankReport& mine)> gather{};
};

// Every (op, size) of `spec` measured as MeasurePoint does, rank 0 printing each result line.
void RunPeerSweep(const SweepSpec& spec, const Peer& peer);

}  // namespace herd::bench
