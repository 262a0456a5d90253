// SparDL all-reduce: the phases in order, and the global residual collection around them.
//
// Buffers. The residual buffer becomes the dense working vector w (working_vector.h): block by
// block, in the pass that first selects from it, x = gradient + previous residual is written
// there and the gradient's block in `data` is cleared, so that `data` is all zeros when the
// result arrives. Every selection moves its entries out of w (sent away, or kept as this rank's
// block of the result); what arrives is added into w; SAG adds its rank's share of what it
// discards back into w. So at the end w holds exactly what this rank did not deliver: its local
// and in-procedure residuals.
//
// The residual rule (global residual collection): at an index of the result's support the new
// residual is w (local + in-procedure residual, stored where it was discarded); at any other
// index it is the rank's own input x, which the working vector restores there (the
// end-procedure residual: nothing at that index reached the result, so every rank keeps its
// own contribution, and whatever w collected there from other ranks is dropped, having been
// kept by its owner). Summed over the ranks this loses nothing: at a supported index the
// transfers conserve the values, elsewhere the inputs come back unchanged.

#include <vector>

#include "algorithms/sparse/schedule.h"
#include "algorithms/sparse/spar_all_gather.h"
#include "algorithms/sparse/spar_reduce_scatter.h"
#include "algorithms/sparse/sparse_allreduce.h"
#include "algorithms/sparse/sparse_bruck.h"
#include "algorithms/sparse/validate.h"
#include "algorithms/sparse/working_vector.h"
#include "common/status.h"

namespace herd::sparse {
namespace {

// The communication phases: SRS inside the team, SAG across the teams, the team's Bruck
// all-gather. On return (*blocks)[b] is the result's block b, not yet divided by P.
absl::Status Exchange(Wire& wire, const SparseAllReduceOptions& o, const BlockLayout& layout,
                      size_t k, WorkingVector& w, std::vector<CooBlock>* blocks) {
  const int P = o.comm->size(), T = o.teams, Q = P / T;
  const int team = o.comm->rank() / Q, position = o.comm->rank() % Q;
  TopkScratch scratch;
  CooBlock& own = (*blocks)[position];
  const Group team_group{team * Q, 1, Q, position};
  HERD_RETURN_IF_ERROR(SparReduceScatter(wire, team_group, layout, k, o.topk, w, &own, &scratch));
  if (T > 1) {
    const Group across{position, Q, T, team};
    const bool recursive =
        o.sag == SagAlgorithm::kRecursive || (o.sag == SagAlgorithm::kAuto && IsPowerOfTwo(T));
    const size_t length = layout.length(position);
    HERD_RETURN_IF_ERROR(
        recursive ? RecursiveSag(wire, across, k, o.topk, w, position, length, &own, &scratch)
                  : BruckSag(wire, across, k, o.topk, o.bsag, w, position, length, &own, &scratch));
  }
  return SparseBruckAllGather(
      wire, Phase::kTeamGather, team_group, k, [&](int m) { return layout.length(m); }, blocks);
}

}  // namespace

absl::Status SparDLAllReduce(const SparseAllReduceOptions& o) {
  constexpr std::string_view kWhat = "SparDL all-reduce";
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(ValidateSparseOptions(kWhat, o, /*teams_apply=*/true));
  if (o.count == 0) return absl::OkStatus();

  transport::Communicator& comm = *o.comm;
  const int P = comm.size(), Q = P / o.teams;
  const BlockLayout layout{o.count, (o.count + Q - 1) / Q, Q};
  const size_t k = BlockK(layout.block, o.density);
  WorkingVector w(o.residual, o.data, layout);
  // Every block is selected once here (k changes) and receives at most k pairs from each of
  // Q - 1 transfers in all; SAG adds about 2k more.
  w.Reserve((2 * static_cast<size_t>(Q) + 2) * k);

  Wire wire(comm, o.tag, deadline, kWhat);
  std::vector<CooBlock> blocks(Q);
  if (absl::Status st = Exchange(wire, o, layout, k, w, &blocks); !st.ok()) {
    // The call failed (the communicator is aborted): nothing was delivered, so x goes back
    // into the residual whole.
    w.RestoreAll();
    return st;
  }

  w.RestoreOutside(blocks);
  const float ranks = static_cast<float>(P);
  for (int b = 0; b < Q; ++b) {
    float* block = o.data + layout.begin(b);
    const CooBlock& c = blocks[b];
    for (size_t e = 0; e < c.size(); ++e) block[c.index[e]] = c.value[e] / ranks;
  }
  return absl::OkStatus();
}

}  // namespace herd::sparse
