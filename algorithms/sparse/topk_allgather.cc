// TopA: the baseline SparDL is measured against. Each rank takes the top-k of its
// gradient + residual over the whole vector (error feedback: the rest is its new residual),
// the selections are Bruck-all-gathered, and every rank adds them up in rank order (the same
// additions in the same order on every rank, so the same bits) and divides by P.

#include <cstring>
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

  // residual := gradient + residual; its top-k moves out into this rank's block.
  for (size_t i = 0; i < o.count; ++i) o.residual[i] += o.data[i];
  std::vector<CooBlock> blocks(P);
  MoveTopK(absl::Span<float>(o.residual, o.count), k, o.topk, &blocks[r], nullptr);

  Wire wire(comm, o.tag, deadline, kWhat);
  const Group all{0, 1, P, r};
  const size_t count = o.count;
  HERD_RETURN_IF_ERROR(SparseBruckAllGather(wire, Phase::kTopA, all, k,
                                            [count](int) { return count; }, &blocks));

  std::memset(o.data, 0, o.count * sizeof(float));
  for (const CooBlock& c : blocks) {
    for (size_t e = 0; e < c.size(); ++e) o.data[c.index[e]] += c.value[e];
  }
  const float ranks = static_cast<float>(P);
  for (size_t i = 0; i < o.count; ++i) o.data[i] /= ranks;
  return absl::OkStatus();
}

}  // namespace herd::sparse
