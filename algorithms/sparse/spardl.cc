// SparDL all-reduce: the phases in order, and the global residual collection around them.
//
// Buffers. `residual` first becomes the input x = gradient + previous residual, and `data` the
// same x as the dense working vector w. Every selection moves its entries out of w (sent away,
// or kept as this rank's block of the result); what arrives is added into w; SAG adds its
// rank's share of what it discards back into w. So at the end w holds exactly what this rank
// did not deliver: its local and in-procedure residuals.
//
// The residual rule (global residual collection): at an index of the result's support the new
// residual is w (local + in-procedure residual, stored where it was discarded); at any other
// index it is the rank's own input x, which `residual` still holds (the end-procedure residual:
// nothing at that index reached the result, so every rank keeps its own contribution, and
// whatever w collected there from other ranks is dropped, having been kept by its owner).
// Summed over the ranks this loses nothing: at a supported index the transfers conserve the
// values, elsewhere the inputs come back unchanged.

#include <cstring>
#include <vector>

#include "algorithms/sparse/schedule.h"
#include "algorithms/sparse/spar_all_gather.h"
#include "algorithms/sparse/spar_reduce_scatter.h"
#include "algorithms/sparse/sparse_allreduce.h"
#include "algorithms/sparse/sparse_bruck.h"
#include "algorithms/sparse/validate.h"
#include "common/status.h"

namespace herd::sparse {

absl::Status SparDLAllReduce(const SparseAllReduceOptions& o) {
  constexpr std::string_view kWhat = "SparDL all-reduce";
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(ValidateSparseOptions(kWhat, o, /*teams_apply=*/true));
  if (o.count == 0) return absl::OkStatus();

  transport::Communicator& comm = *o.comm;
  const int P = comm.size(), T = o.teams, Q = P / T;
  const int team = comm.rank() / Q, position = comm.rank() % Q;
  const BlockLayout layout{o.count, (o.count + Q - 1) / Q, Q};
  const size_t k = BlockK(layout.block, o.density);
  float* w = o.data;

  for (size_t i = 0; i < o.count; ++i) {
    const float x = w[i] + o.residual[i];
    w[i] = x;
    o.residual[i] = x;
  }

  Wire wire(comm, o.tag, deadline, kWhat);
  TopkScratch scratch;
  const Group team_group{team * Q, 1, Q, position};
  std::vector<CooBlock> blocks(Q);
  HERD_RETURN_IF_ERROR(
      SparReduceScatter(wire, team_group, layout, k, o.topk, w, &blocks[position], &scratch));

  if (T > 1) {
    const Group across{position, Q, T, team};
    const bool recursive = o.sag == SagAlgorithm::kRecursive ||
                           (o.sag == SagAlgorithm::kAuto && IsPowerOfTwo(T));
    absl::Span<float> w_block = layout.of(w, position);
    HERD_RETURN_IF_ERROR(
        recursive ? RecursiveSag(wire, across, k, o.topk, w_block, &blocks[position], &scratch)
                  : BruckSag(wire, across, k, o.topk, o.bsag, w_block, &blocks[position],
                             &scratch));
  }

  HERD_RETURN_IF_ERROR(SparseBruckAllGather(
      wire, Phase::kTeamGather, team_group, k, [&](int m) { return layout.length(m); }, &blocks));

  // Residuals at the support, then the result (w and data are the same memory).
  for (int b = 0; b < Q; ++b) {
    const size_t base = layout.begin(b);
    for (uint32_t i : blocks[b].index) o.residual[base + i] = w[base + i];
  }
  std::memset(o.data, 0, o.count * sizeof(float));
  const float ranks = static_cast<float>(P);
  for (int b = 0; b < Q; ++b) {
    float* block = o.data + layout.begin(b);
    const CooBlock& c = blocks[b];
    for (size_t e = 0; e < c.size(); ++e) block[c.index[e]] = c.value[e] / ranks;
  }
  return absl::OkStatus();
}

}  // namespace herd::sparse
