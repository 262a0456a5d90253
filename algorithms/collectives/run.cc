#include "algorithms/collectives/run.h"

#include <string>

#include "absl/strings/str_format.h"
#include "algorithms/collectives/decision_table.h"
#include "algorithms/collectives/internal.h"
#include "common/status.h"
#include "transport/native_collectives.h"

namespace herd::collectives {
namespace {

// The message lists what the operation does support, so a mistyped plan or flag is fixed at once.
absl::Status Unsupported(std::string_view operation, Algorithm a, std::string_view supported) {
  return absl::InvalidArgumentError(absl::StrFormat("%s has no algorithm '%s'; supported: %s",
                                                    operation, AlgorithmName(a), supported));
}

// "native": the backend's own collective, with the same validation as the host algorithms.
absl::StatusOr<transport::NativeCollectives*> NativeFor(std::string_view what,
                                                        const CommonOptions& o, const void* data,
                                                        size_t count) {
  HERD_RETURN_IF_ERROR(internal::ValidateBase(what, o, data, count));
  return internal::Native(what, *o.comm);
}

// "auto": the decision table's pick for this call, after the checks every algorithm makes
// first (so a bad option is reported the same whatever would have been picked).
absl::StatusOr<Algorithm> Auto(std::string_view operation, CollectiveOp op, const CommonOptions& o,
                               const void* data, size_t count) {
  HERD_RETURN_IF_ERROR(
      internal::ValidateBase(absl::StrFormat("auto %s", operation), o, data, count));
  auto pick = ResolveAuto(op, o, count);
  if (!pick.ok()) {
    return absl::Status(
        pick.status().code(),
        absl::StrFormat("auto %s: %s", operation, std::string(pick.status().message())));
  }
  return *pick;
}

}  // namespace

// The host algorithms validate their own options; only "native" is validated here, since it
// goes straight to the backend. The native paths mirror the early return of the host ones
// (P == 1 or count == 0), so a caller cannot tell which ran.
absl::Status AllReduce(const AllReduceOptions& o, Algorithm a) {
  switch (a) {
    case Algorithm::kAuto: {
      HERD_ASSIGN_OR_RETURN(Algorithm pick,
                            Auto("all-reduce", CollectiveOp::kAllReduce, o, o.data, o.count));
      return AllReduce(o, pick);
    }
    case Algorithm::kRing:
      return RingAllReduce(o);
    case Algorithm::kRecursiveDoubling:
      return RecursiveDoublingAllReduce(o);
    case Algorithm::kRecursiveHalving:
      return RecursiveHalvingAllReduce(o);
    case Algorithm::kOneShot:
      return OneShotAllReduce(o);
    case Algorithm::kLinearPipeline:
      return LinearPipelineAllReduce(o);
    case Algorithm::kBinomialTree:
      return BinomialTreeAllReduce(o);
    case Algorithm::kShm:
      return ShmAllReduce(o);
    case Algorithm::kHierarchical:
      return HierarchicalAllReduce(o);
    case Algorithm::kNative: {
      constexpr std::string_view kWhat = "native all-reduce";
      const Deadline deadline = Deadline::After(o.timeout);
      HERD_ASSIGN_OR_RETURN(auto* native, NativeFor(kWhat, o, o.data, o.count));
      HERD_RETURN_IF_ERROR(internal::ValidateOp(kWhat, o.dtype, o.op));
      if (o.comm->size() == 1 || o.count == 0) return absl::OkStatus();
      return native->AllReduce(o.data, o.count, o.dtype, o.op, deadline);
    }
    default:
      return Unsupported("all-reduce", a,
                         "auto, ring, lp, tree, rd, rh, oneshot, shm, hier, native");
  }
}

absl::Status AllGather(const AllGatherOptions& o, Algorithm a) {
  switch (a) {
    case Algorithm::kAuto: {
      HERD_ASSIGN_OR_RETURN(Algorithm pick,
                            Auto("all-gather", CollectiveOp::kAllGather, o, o.data, o.count));
      return AllGather(o, pick);
    }
    case Algorithm::kOneShot:
      return OneShotAllGather(o);
    case Algorithm::kRing:
      return RingAllGather(o);
    case Algorithm::kRecursiveDoubling:
      return RecursiveDoublingAllGather(o);
    case Algorithm::kBruck:
      return BruckAllGather(o);
    case Algorithm::kShm:
      return ShmAllGather(o);
    case Algorithm::kHierarchical:
      return HierarchicalAllGather(o);
    case Algorithm::kNative: {
      const Deadline deadline = Deadline::After(o.timeout);
      HERD_ASSIGN_OR_RETURN(auto* native, NativeFor("native all-gather", o, o.data, o.count));
      if (o.comm->size() == 1 || o.count == 0) return absl::OkStatus();
      return native->AllGather(o.data, o.count, o.dtype, deadline);
    }
    default:
      return Unsupported("all-gather", a, "auto, ring, rd, bruck, oneshot, shm, hier, native");
  }
}

absl::Status ReduceScatter(const ReduceScatterOptions& o, Algorithm a) {
  switch (a) {
    case Algorithm::kAuto: {
      HERD_ASSIGN_OR_RETURN(
          Algorithm pick, Auto("reduce-scatter", CollectiveOp::kReduceScatter, o, o.data, o.count));
      return ReduceScatter(o, pick);
    }
    case Algorithm::kRecursiveHalving:
      return RecursiveHalvingReduceScatter(o);
    case Algorithm::kOneShot:
      return OneShotReduceScatter(o);
    case Algorithm::kRing:
      return RingReduceScatter(o);
    case Algorithm::kShm:
      return ShmReduceScatter(o);
    case Algorithm::kHierarchical:
      return HierarchicalReduceScatter(o);
    case Algorithm::kNative: {
      constexpr std::string_view kWhat = "native reduce-scatter";
      const Deadline deadline = Deadline::After(o.timeout);
      HERD_ASSIGN_OR_RETURN(auto* native, NativeFor(kWhat, o, o.data, o.count));
      HERD_RETURN_IF_ERROR(internal::ValidateOp(kWhat, o.dtype, o.op));
      if (o.comm->size() == 1 || o.count == 0) return absl::OkStatus();
      return native->ReduceScatter(o.data, o.count, o.dtype, o.op, deadline);
    }
    default:
      return Unsupported("reduce-scatter", a, "auto, ring, rh, oneshot, shm, hier, native");
  }
}

absl::Status Broadcast(const BroadcastOptions& o, Algorithm a) {
  switch (a) {
    case Algorithm::kAuto: {
      HERD_ASSIGN_OR_RETURN(Algorithm pick,
                            Auto("broadcast", CollectiveOp::kBroadcast, o, o.data, o.count));
      return Broadcast(o, pick);
    }
    case Algorithm::kLinearPipeline:
      return LinearPipelineBroadcast(o);
    case Algorithm::kBinomialTree:
      return BinomialBroadcast(o);
    case Algorithm::kShm:
      return ShmBroadcast(o);
    case Algorithm::kHierarchical:
      return HierarchicalBroadcast(o);
    default:
      return Unsupported("broadcast", a, "auto, lp, tree, shm, hier");
  }
}

absl::Status Reduce(const ReduceOptions& o, Algorithm a) {
  switch (a) {
    case Algorithm::kAuto: {
      HERD_ASSIGN_OR_RETURN(Algorithm pick,
                            Auto("reduce", CollectiveOp::kReduce, o, o.data, o.count));
      return Reduce(o, pick);
    }
    case Algorithm::kLinearPipeline:
      return LinearPipelineReduce(o);
    case Algorithm::kBinomialTree:
      return BinomialReduce(o);
    default:
      return Unsupported("reduce", a, "auto, lp, tree");
  }
}

}  // namespace herd::collectives
