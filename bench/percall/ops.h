#pragma once
// The operations whose per-call time herd_sparse_bench, herd_lowprec_bench and the emulator's
// mode probes measure: one call of a communication mode's collective on this rank's `count`
// fp32 values, in place, with whatever state the mode carries from call to call (residuals,
// replicas, workspaces) kept inside the operation as training keeps it.
//
//   ring                 collectives::RingAllReduce (sum; average with OpParams::average)
//   spardl               sparse::SparDLAllReduce (density, teams, sag, topk)
//   topa                 sparse::TopkAllGatherAllReduce, the all-gather of top-k (density, topk)
//   clps                 lowprec::CentralizedLowPrecisionAllReduce, average, both residuals
//   decentralized        D_FP_S with the ring peers of iteration i, halves of the model to each
//   decentralized_whole  D_FP_S sending the whole model to each neighbour
//   decentralized_lp     D_LP_S, ring, compressed model differences with neighbour replicas

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "algorithms/compression/compressor.h"
#include "algorithms/sparse/sparse_allreduce.h"
#include "transport/communicator.h"

namespace herd::bench {

struct OpParams {
  size_t count = 0;
  bool average = false;  // ring
  double density = 0.01;
  int teams = 1;
  sparse::SagAlgorithm sag = sparse::SagAlgorithm::kAuto;
  sparse::TopkMethod topk = sparse::TopkMethod::kExact;
  compression::Compressor compressor = compression::Compressor::kMinMaxUInt8;
  size_t segment_bytes = size_t{1} << 20;  // message size of the decentralized operations
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};  // of each call
};

// One call at `iteration` (0, 1, ...: seeds and peers follow it).
using OpCall = std::function<absl::Status(int64_t iteration)>;

// The operation `name` on `data` (params.count values; its content is the model or gradient,
// the caller may rewrite it between calls). decentralized_lp exchanges its initial replicas
// here (a collective: every rank makes the same operations in the same order). INVALID_ARGUMENT
// naming the known operations for an unknown `name`. `comm` and `data` must outlive the call.
absl::StatusOr<OpCall> MakeOp(const std::string& name, transport::Communicator& comm,
                              const OpParams& params, float* data);

// This rank's gradient: heavy-tailed values (a normal times a log-normal scale, as gradients
// are) from a fixed hash of the rank, so every run measures the same inputs and the ranks'
// top-k selections differ as they do in training.
std::vector<float> Gradient(size_t count, int rank);

}  // namespace herd::bench
