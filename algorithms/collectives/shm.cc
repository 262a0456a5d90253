// The shared-memory collectives of one host: reduce-scatter, all-gather, all-reduce and
// broadcast through the host's segment (shm_engine.h has the pipeline, transport/shm the
// segment). Every rank of the communicator must be on this host; on one host a rank's local
// index in the segment is its rank.

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "algorithms/collectives/allgather.h"
#include "algorithms/collectives/allreduce.h"
#include "algorithms/collectives/broadcast.h"
#include "algorithms/collectives/internal.h"
#include "algorithms/collectives/reduce_scatter.h"
#include "algorithms/collectives/shm_engine.h"
#include "algorithms/collectives/topology.h"
#include "common/status.h"

namespace herd::collectives {
namespace {

using internal::ShmMode;
using internal::ShmPlan;
using transport::Communicator;
using transport::OpKind;

// This host's domain, when every rank of `comm` is on it.
absl::StatusOr<transport::shm::Domain*> OneHostDomain(std::string_view what, Communicator& comm,
                                                      Deadline deadline) {
  HERD_ASSIGN_OR_RETURN(Topology * topo, TopologyOf(comm, deadline));
  const HostLayout& l = topo->layout();
  if (l.hosts != 1) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s needs every rank on one host; the communicator has %s (use hier)", what, l.Describe()));
  }
  if (topo->domain() == nullptr) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: %s", what,
        topo->shm_error().empty() ? "this host has no shared-memory segment" : topo->shm_error()));
  }
  return topo->domain();
}

std::string What(std::string_view name, OpKind kind, uint32_t tag) {
  return absl::StrFormat("%s (%s id=%d)", name, transport::OpKindName(kind), tag);
}

}  // namespace

size_t DefaultShmDirectBytes() {
  static const size_t bytes = [] {
    const char* v = std::getenv("HERD_SHM_DIRECT_BYTES");
    size_t out = 0;
    if (v != nullptr && absl::SimpleAtoi(v, &out)) return out;
    return size_t{256} << 10;
  }();
  return bytes;
}

absl::Status ShmAllReduce(const AllReduceOptions& o) {
  constexpr std::string_view kWhat = "shm all-reduce";
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(internal::ValidateBase(kWhat, o, o.data, o.count));
  HERD_RETURN_IF_ERROR(internal::ValidateOp(kWhat, o.dtype, o.op));
  HERD_RETURN_IF_ERROR(internal::RequireHostMemory(kWhat, *o.comm));
  Communicator& comm = *o.comm;
  if (comm.size() == 1 || o.count == 0) return absl::OkStatus();
  HERD_ASSIGN_OR_RETURN(transport::shm::Domain * domain, OneHostDomain(kWhat, comm, deadline));
  const size_t es = DTypeSize(o.dtype);
  ShmPlan plan;
  plan.dtype = o.dtype;
  plan.op = o.op;
  plan.data = static_cast<std::byte*>(o.data);
  plan.divide_by = comm.size();
  if (o.count * es <= o.shm_direct_bytes) {
    plan.mode = ShmMode::kAllReduceDirect;
    plan.regions = {internal::WholeRegion(o.count, es)};
  } else {
    plan.mode = ShmMode::kAllReduce;
    plan.regions = internal::ChunkRegions(o.count, comm.size(), es);
  }
  return internal::RunShmOperation(comm, *domain, OpKind::kAllReduce, o.tag, 0, plan, deadline,
                                   What(kWhat, OpKind::kAllReduce, o.tag));
}

absl::Status ShmReduceScatter(const ReduceScatterOptions& o) {
  constexpr std::string_view kWhat = "shm reduce-scatter";
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(internal::ValidateBase(kWhat, o, o.data, o.count));
  HERD_RETURN_IF_ERROR(internal::ValidateOp(kWhat, o.dtype, o.op));
  HERD_RETURN_IF_ERROR(internal::RequireHostMemory(kWhat, *o.comm));
  Communicator& comm = *o.comm;
  if (comm.size() == 1 || o.count == 0) return absl::OkStatus();
  HERD_ASSIGN_OR_RETURN(transport::shm::Domain * domain, OneHostDomain(kWhat, comm, deadline));
  ShmPlan plan;
  plan.mode = ShmMode::kReduceScatter;
  plan.dtype = o.dtype;
  plan.op = o.op;
  plan.data = static_cast<std::byte*>(o.data);
  plan.regions = internal::ChunkRegions(o.count, comm.size(), DTypeSize(o.dtype));
  plan.divide_by = comm.size();
  return internal::RunShmOperation(comm, *domain, OpKind::kReduceScatter, o.tag, 0, plan, deadline,
                                   What(kWhat, OpKind::kReduceScatter, o.tag));
}

absl::Status ShmAllGather(const AllGatherOptions& o) {
  constexpr std::string_view kWhat = "shm all-gather";
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(internal::ValidateBase(kWhat, o, o.data, o.count));
  HERD_RETURN_IF_ERROR(internal::RequireHostMemory(kWhat, *o.comm));
  Communicator& comm = *o.comm;
  if (comm.size() == 1 || o.count == 0) return absl::OkStatus();
  HERD_ASSIGN_OR_RETURN(transport::shm::Domain * domain, OneHostDomain(kWhat, comm, deadline));
  ShmPlan plan;
  plan.mode = ShmMode::kAllGather;
  plan.dtype = o.dtype;
  plan.data = static_cast<std::byte*>(o.data);
  plan.regions = internal::ChunkRegions(o.count, comm.size(), DTypeSize(o.dtype));
  return internal::RunShmOperation(comm, *domain, OpKind::kAllGather, o.tag, 0, plan, deadline,
                                   What(kWhat, OpKind::kAllGather, o.tag));
}

absl::Status ShmBroadcast(const BroadcastOptions& o) {
  constexpr std::string_view kWhat = "shm broadcast";
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(internal::ValidateBase(kWhat, o, o.data, o.count));
  HERD_RETURN_IF_ERROR(internal::ValidateRoot(kWhat, o.root, o.comm->size()));
  HERD_RETURN_IF_ERROR(internal::RequireHostMemory(kWhat, *o.comm));
  Communicator& comm = *o.comm;
  if (comm.size() == 1 || o.count == 0) return absl::OkStatus();
  HERD_ASSIGN_OR_RETURN(transport::shm::Domain * domain, OneHostDomain(kWhat, comm, deadline));
  ShmPlan plan;
  plan.mode = ShmMode::kBroadcast;
  plan.dtype = o.dtype;
  plan.data = static_cast<std::byte*>(o.data);
  plan.regions = {internal::WholeRegion(o.count, DTypeSize(o.dtype))};
  plan.root = o.root;
  return internal::RunShmOperation(comm, *domain, OpKind::kBroadcast, o.tag, 0, plan, deadline,
                                   What(kWhat, OpKind::kBroadcast, o.tag));
}

}  // namespace herd::collectives
