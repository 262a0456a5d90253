// TopA: the baseline SparDL is measured against. Each rank takes the top-k of its
// gradient + residual over the whole vector (error feedback: the rest is its new residual),
// the selections are Bruck-all-gathered, and every rank adds them up in rank order (the same
// additions in the same order on every rank, so the same bits) and divides by P.
// Where several ranks selected an index the sum may cancel to exactly 0: the result is then 0
// there although the index was delivered (the ranks' residuals are 0 there too).

#include <utility>
#include <vector>

#include "algorithms/sparse/schedule.h"
#include "algorithms/sparse/sparse_allreduce.h"
#include "algorithms/sparse/sparse_bruck.h"
#include "algorithms/sparse/topk.h"
#include "algorithms/sparse/validate.h"
#include "common/status.h"

namespace herd::sparse {

absl::Status TopkAllGatherAllReduce(const SparseAllReduceOptions& o) {
  constexpr std::string_view kWhat = "TopA all-reduce";
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(ValidateSparseOptions(kWhat, o, /*teams_apply=*/false));
  if (o.count == 0) return absl::OkStatus();

  transport::Communicator& comm = *o.comm;
  const int P = comm.size(), r = comm.rank();
  const size_t k = BlockK(o.count, o.density);

  // One pass: residual := x = gradient + residual, data := 0, and the candidates of the top-k;
  // then the top-k moves out of the residual into this rank's block.
  std::vector<CooBlock> blocks(P);
  TopkScratch scratch;
  SelectTopKOfSum(absl::Span<float>(o.residual, o.count), absl::Span<float>(o.data, o.count), k,
                  o.topk, &scratch.positions, &scratch);
  CooBlock& mine = blocks[r];
  mine.index.reserve(scratch.positions.size());
  mine.value.reserve(scratch.positions.size());
  for (uint32_t i : scratch.positions) {
    mine.Add(i, o.residual[i]);
    o.residual[i] = 0;
  }

  Wire wire(comm, o.tag, deadline, kWhat);
  const Group all{0, 1, P, r};
  const size_t count = o.count;
  if (absl::Status st = SparseBruckAllGather(
          wire, Phase::kTopA, all, k, [count](int) { return count; }, &blocks);
      !st.ok()) {
    // Nothing was delivered: the selection goes back into the residual, which is x again.
    for (size_t e = 0; e < mine.size(); ++e) o.residual[mine.index[e]] = mine.value[e];
    return st;
  }

  // Sparse sum in rank order ((b0 + b1) + b2) + ..., then one division per index of the union
  // into `data`, which the first pass cleared.
  CooBlock sum = std::move(blocks[0]), next;
  for (int q = 1; q < P; ++q) {
    MergeSum(sum, blocks[q], &next);
    std::swap(sum, next);
  }
  const float ranks = static_cast<float>(P);
  for (size_t e = 0; e < sum.size(); ++e) o.data[sum.index[e]] = sum.value[e] / ranks;
  return absl::OkStatus();
}

}  // namespace herd::sparse
