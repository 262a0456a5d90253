#pragma once
// What the peer programs (herd-bench-mpi, herd-bench-gloo) share: the element count each
// operation runs with, and the parse of their command line.
//
// MPI_Reduce_scatter_block, MPI_Allgather, MPI_Alltoall and Gloo's reduce-scatter, allgather
// and alltoall take equal blocks per rank, so for those the count is rounded down to a multiple
// of the rank count (and `bytes` in the result says what moved). With such a count herd's chunk
// layout is exactly those equal blocks, so the peers fill and verify with bench/pattern.h's
// herd-layout functions, except where a peer puts a result elsewhere (documented there).

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "bench/pattern.h"
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
// --rank, --ranks and --store-dir.
struct PeerFlags {
  SweepFlags sweep;
  int rank = -1;
  int ranks = 0;
  std::string store_dir;
  void Register(CLI::App& app, bool with_rendezvous);
};

}  // namespace herd::bench
