#pragma once
// Dispatch by algorithm name: the benchmark and the worker pick an algorithm per operation at
// run time (e.g. from a flag or a plan) and call one of these. Each forwards to the free
// function of the operation's header; the options keep their meaning.
//
// Supported pairs (anything else is INVALID_ARGUMENT listing the supported algorithms, nothing
// sent):
//   AllReduce      auto, ring, lp, tree, rd, rh, oneshot, shm, hier, native
//   AllGather      auto, ring, rd, bruck, oneshot, shm, hier, native
//   ReduceScatter  auto, ring, rh, oneshot, shm, hier, native
//   Broadcast      auto, lp, tree, shm, hier
//   Reduce         auto, lp, tree
// "auto" (the default) runs what the decision table (decision_table.h) picks for the operation,
// the element size, the vector's bytes and the rank count; every rank must see the same table.
// "native" runs the backend's own collective (comm->native(), e.g. NCCL); it is
// FAILED_PRECONDITION on a communicator that has none. "ring" on a communicator whose memory is
// not host memory also delegates to the native op (see ring.cc).

#include "absl/status/status.h"
#include "algorithms/collectives/allgather.h"
#include "algorithms/collectives/allreduce.h"
#include "algorithms/collectives/broadcast.h"
#include "algorithms/collectives/options.h"
#include "algorithms/collectives/reduce.h"
#include "algorithms/collectives/reduce_scatter.h"

namespace herd::collectives {

absl::Status AllReduce(const AllReduceOptions& options, Algorithm algorithm = Algorithm::kAuto);
absl::Status AllGather(const AllGatherOptions& options, Algorithm algorithm = Algorithm::kAuto);
absl::Status ReduceScatter(const ReduceScatterOptions& options,
                           Algorithm algorithm = Algorithm::kAuto);
absl::Status Broadcast(const BroadcastOptions& options, Algorithm algorithm = Algorithm::kAuto);
absl::Status Reduce(const ReduceOptions& options, Algorithm algorithm = Algorithm::kAuto);

}  // namespace herd::collectives
