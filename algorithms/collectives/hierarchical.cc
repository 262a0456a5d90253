// Hierarchical collectives: shared memory within each host (shm_engine.h), a flat algorithm over
// UCX between hosts, for the communicator's host layout (topology.h).
//
// With G ranks on every host (uniform layout), the rank with local index l on host h is the
// h-th member of rail l (Topology::rail). Hosts are numbered by their lowest rank; ranks need not
// be placed host by host.
//   all-reduce      shm reduce-scatter within the host: local rank l gets the host's sum of
//                   chunk l of G; an all-reduce of that chunk along rail l (the decision table's
//                   flat pick for H ranks, op sum; an average divides once, afterwards, by P);
//                   shm all-gather of the G chunks within the host.
//   reduce-scatter  the result is the flat layout: rank r holds chunk r of P. Rail l's ranks own
//                   chunks {rank(h, l)}; the shm reduce-scatter gives local rank l its host's sums
//                   of those H chunks (in place), then a ring reduce-scatter along the rail (over
//                   those chunks, wherever they lie) leaves each its own chunk.
//   all-gather      the reverse: a ring all-gather of the rail's chunks along the rail, then a shm
//                   all-gather of each rail's chunks within the host.
//   broadcast       among one rank per host (the root; each other host's lowest rank), then shm
//                   within each host from that rank.
// Hosts with different numbers of ranks: the all-reduce reduces to each host's lowest rank
// (shm), all-reduces among those, and broadcasts within the host (shm); reduce-scatter and
// all-gather refuse (FAILED_PRECONDITION), and auto never picks them there.
//
// The shm phases run as lane operations of their own (phase 0 and 1 of the key), so no lane of
// the segment is held while a rank waits for other hosts. A failure between hosts aborts the
// communicator (the flat algorithm does) and is published to the host's members.

#include "absl/strings/str_format.h"
#include "algorithms/collectives/allgather.h"
#include "algorithms/collectives/allreduce.h"
#include "algorithms/collectives/broadcast.h"
#include "algorithms/collectives/decision_table.h"
#include "algorithms/collectives/internal.h"
#include "algorithms/collectives/rails.h"
#include "algorithms/collectives/reduce_scatter.h"
#include "algorithms/collectives/run.h"
#include "algorithms/collectives/shm_engine.h"
#include "algorithms/collectives/sub_communicator.h"
#include "algorithms/collectives/topology.h"
#include "common/status.h"

namespace herd::collectives {
namespace {

using internal::Region;
using internal::ShmMode;
using internal::ShmPlan;
using transport::Communicator;
using transport::OpKind;

std::string What(std::string_view name, OpKind kind, uint32_t tag) {
  return absl::StrFormat("%s (%s id=%d)", name, transport::OpKindName(kind), tag);
}

// The topology, checked for a hierarchical algorithm: shared memory must work on every host.
absl::StatusOr<Topology*> HierTopology(std::string_view what, Communicator& comm,
                                       Deadline deadline) {
  HERD_ASSIGN_OR_RETURN(Topology * topo, TopologyOf(comm, deadline));
  if (!topo->shm_ok()) {
    return absl::FailedPreconditionError(absl::StrFormat("%s: %s", what, topo->shm_error()));
  }
  return topo;
}

std::chrono::milliseconds Left(Deadline deadline) {
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline.remaining()));
}

// The flat algorithm the table picks for `bytes` among one rank per host.
absl::StatusOr<Algorithm> FlatPick(CollectiveOp op, DType dtype, size_t bytes, int hosts) {
  return ResolveFor(op, DTypeSize(dtype), bytes, LayoutTraits{hosts, hosts, false, true});
}

using internal::RailChunks;
using internal::RailRegions;

// Hosts of unequal sizes: reduce to each host's lowest rank, all-reduce among those, broadcast.
absl::Status LeaderAllReduce(const AllReduceOptions& o, Topology& topo, Deadline deadline,
                             const std::string& what) {
  Communicator& comm = *o.comm;
  const HostLayout& l = topo.layout();
  transport::shm::Domain* domain = topo.domain();
  const size_t es = DTypeSize(o.dtype);
  const int G = l.size_of(l.host);
  if (G > 1) {
    ShmPlan reduce;
    reduce.mode = ShmMode::kReduce;
    reduce.dtype = o.dtype;
    reduce.op = o.op;
    reduce.data = static_cast<std::byte*>(o.data);
    reduce.regions = internal::ChunkRegions(o.count, G, es);
    reduce.root = 0;
    HERD_RETURN_IF_ERROR(internal::RunShmOperation(comm, *domain, OpKind::kAllReduce, o.tag, 0,
                                                   reduce, deadline, what));
  }
  if (l.local == 0) {
    std::vector<int> leaders;
    for (int h = 0; h < l.hosts; ++h) leaders.push_back(l.rank_at(h, 0));
    internal::SubCommunicator sub(comm, std::move(leaders));
    AllReduceOptions between = o;
    between.comm = &sub;
    between.op = o.op == ReduceOp::kAverage ? ReduceOp::kSum : o.op;
    between.timeout = Left(deadline);
    HERD_ASSIGN_OR_RETURN(Algorithm a,
                          FlatPick(CollectiveOp::kAllReduce, o.dtype, o.count * es, l.hosts));
    if (absl::Status st = AllReduce(between, a); !st.ok()) {
      return internal::ShmFail(comm, domain, st);
    }
    FinishReduction(o.dtype, o.op, o.data, o.count, l.ranks);
  }
  if (G > 1) {
    ShmPlan bcast;
    bcast.mode = ShmMode::kBroadcast;
    bcast.dtype = o.dtype;
    bcast.data = static_cast<std::byte*>(o.data);
    bcast.regions = {internal::WholeRegion(o.count, es)};
    bcast.root = 0;
    HERD_RETURN_IF_ERROR(internal::RunShmOperation(comm, *domain, OpKind::kAllReduce, o.tag, 1,
                                                   bcast, deadline, what));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status HierarchicalAllReduce(const AllReduceOptions& o) {
  constexpr std::string_view kWhat = "hier all-reduce";
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(internal::ValidateBase(kWhat, o, o.data, o.count));
  HERD_RETURN_IF_ERROR(internal::ValidateOp(kWhat, o.dtype, o.op));
  HERD_RETURN_IF_ERROR(internal::RequireHostMemory(kWhat, *o.comm));
  Communicator& comm = *o.comm;
  if (comm.size() == 1 || o.count == 0) return absl::OkStatus();
  HERD_ASSIGN_OR_RETURN(Topology * topo, HierTopology(kWhat, comm, deadline));
  const HostLayout& l = topo->layout();
  if (l.hosts == 1) return ShmAllReduce(o);
  const std::string what = What(kWhat, OpKind::kAllReduce, o.tag);
  if (l.per_host == 0) return LeaderAllReduce(o, *topo, deadline, what);

  transport::shm::Domain* domain = topo->domain();
  const int G = l.per_host;
  const size_t es = DTypeSize(o.dtype);
  auto* data = static_cast<std::byte*>(o.data);
  const std::vector<Region> regions = internal::ChunkRegions(o.count, G, es);
  if (G > 1) {
    ShmPlan rs;
    rs.mode = ShmMode::kReduceScatter;
    rs.dtype = o.dtype;
    rs.op = o.op;  // an average accumulates as a sum; divided below
    rs.data = data;
    rs.regions = regions;
    HERD_RETURN_IF_ERROR(
        internal::RunShmOperation(comm, *domain, OpKind::kAllReduce, o.tag, 0, rs, deadline, what));
  }
  const size_t begin = ChunkBegin(o.count, G, l.local), size = ChunkSize(o.count, G, l.local);
  if (size > 0) {
    // Every member of the rail has this local index, hence this chunk size: all skip or none.
    AllReduceOptions rail = o;
    rail.comm = topo->rail();
    rail.data = data + begin * es;
    rail.count = size;
    rail.op = o.op == ReduceOp::kAverage ? ReduceOp::kSum : o.op;
    rail.timeout = Left(deadline);
    HERD_ASSIGN_OR_RETURN(Algorithm a,
                          FlatPick(CollectiveOp::kAllReduce, o.dtype, size * es, l.hosts));
    if (absl::Status st = AllReduce(rail, a); !st.ok()) return internal::ShmFail(comm, domain, st);
    FinishReduction(o.dtype, o.op, data + begin * es, size, l.ranks);
  }
  if (G > 1) {
    ShmPlan ag;
    ag.mode = ShmMode::kAllGather;
    ag.dtype = o.dtype;
    ag.data = data;
    ag.regions = regions;
    HERD_RETURN_IF_ERROR(
        internal::RunShmOperation(comm, *domain, OpKind::kAllReduce, o.tag, 1, ag, deadline, what));
  }
  return absl::OkStatus();
}

absl::Status HierarchicalReduceScatter(const ReduceScatterOptions& o) {
  constexpr std::string_view kWhat = "hier reduce-scatter";
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(internal::ValidateBase(kWhat, o, o.data, o.count));
  HERD_RETURN_IF_ERROR(internal::ValidateOp(kWhat, o.dtype, o.op));
  HERD_RETURN_IF_ERROR(internal::ValidatePositive(kWhat, "segment_bytes", o.segment_bytes));
  HERD_RETURN_IF_ERROR(internal::RequireHostMemory(kWhat, *o.comm));
  Communicator& comm = *o.comm;
  if (comm.size() == 1 || o.count == 0) return absl::OkStatus();
  HERD_ASSIGN_OR_RETURN(Topology * topo, HierTopology(kWhat, comm, deadline));
  const HostLayout& l = topo->layout();
  if (l.hosts == 1) return ShmReduceScatter(o);
  if (l.per_host == 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s needs as many ranks on every host; the communicator has %s", kWhat, l.Describe()));
  }
  const std::string what = What(kWhat, OpKind::kReduceScatter, o.tag);
  transport::shm::Domain* domain = topo->domain();
  const size_t es = DTypeSize(o.dtype);
  auto* data = static_cast<std::byte*>(o.data);
  const ReduceOp op = o.op == ReduceOp::kAverage ? ReduceOp::kSum : o.op;
  if (l.per_host > 1) {
    ShmPlan rs;
    rs.mode = ShmMode::kReduceScatter;
    rs.dtype = o.dtype;
    rs.op = op;
    rs.data = data;
    rs.regions = RailRegions(l, o.count, es);
    HERD_RETURN_IF_ERROR(internal::RunShmOperation(comm, *domain, OpKind::kReduceScatter, o.tag, 0,
                                                   rs, deadline, what));
  }
  absl::Status st =
      internal::RingReduceScatterChunks(*topo->rail(), data, RailChunks(l, o.count, l.local),
                                        o.dtype, op, o.tag, o.segment_bytes, deadline);
  if (!st.ok()) return internal::ShmFail(comm, domain, st);
  const int r = comm.rank();
  FinishReduction(o.dtype, o.op, data + ChunkBegin(o.count, l.ranks, r) * es,
                  ChunkSize(o.count, l.ranks, r), l.ranks);
  return absl::OkStatus();
}

absl::Status HierarchicalAllGather(const AllGatherOptions& o) {
  constexpr std::string_view kWhat = "hier all-gather";
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(internal::ValidateBase(kWhat, o, o.data, o.count));
  HERD_RETURN_IF_ERROR(internal::ValidatePositive(kWhat, "segment_bytes", o.segment_bytes));
  HERD_RETURN_IF_ERROR(internal::RequireHostMemory(kWhat, *o.comm));
  Communicator& comm = *o.comm;
  if (comm.size() == 1 || o.count == 0) return absl::OkStatus();
  HERD_ASSIGN_OR_RETURN(Topology * topo, HierTopology(kWhat, comm, deadline));
  const HostLayout& l = topo->layout();
  if (l.hosts == 1) return ShmAllGather(o);
  if (l.per_host == 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s needs as many ranks on every host; the communicator has %s", kWhat, l.Describe()));
  }
  const std::string what = What(kWhat, OpKind::kAllGather, o.tag);
  transport::shm::Domain* domain = topo->domain();
  auto* data = static_cast<std::byte*>(o.data);
  absl::Status st =
      internal::RingAllGatherChunks(*topo->rail(), data, RailChunks(l, o.count, l.local), o.dtype,
                                    o.tag, o.segment_bytes, deadline);
  if (!st.ok()) return internal::ShmFail(comm, domain, st);
  if (l.per_host > 1) {
    ShmPlan ag;
    ag.mode = ShmMode::kAllGather;
    ag.dtype = o.dtype;
    ag.data = data;
    ag.regions = RailRegions(l, o.count, DTypeSize(o.dtype));
    HERD_RETURN_IF_ERROR(
        internal::RunShmOperation(comm, *domain, OpKind::kAllGather, o.tag, 0, ag, deadline, what));
  }
  return absl::OkStatus();
}

absl::Status HierarchicalBroadcast(const BroadcastOptions& o) {
  constexpr std::string_view kWhat = "hier broadcast";
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(internal::ValidateBase(kWhat, o, o.data, o.count));
  HERD_RETURN_IF_ERROR(internal::ValidateRoot(kWhat, o.root, o.comm->size()));
  HERD_RETURN_IF_ERROR(internal::RequireHostMemory(kWhat, *o.comm));
  Communicator& comm = *o.comm;
  if (comm.size() == 1 || o.count == 0) return absl::OkStatus();
  HERD_ASSIGN_OR_RETURN(Topology * topo, HierTopology(kWhat, comm, deadline));
  const HostLayout& l = topo->layout();
  if (l.hosts == 1) return ShmBroadcast(o);
  const std::string what = What(kWhat, OpKind::kBroadcast, o.tag);
  transport::shm::Domain* domain = topo->domain();
  const int root_host = l.host_of[o.root];
  // Each host's representative: the root on its host, the lowest rank elsewhere.
  auto rep = [&](int h) { return h == root_host ? o.root : l.rank_at(h, 0); };
  const int me = comm.rank(), mine = rep(l.host);
  if (me == mine) {
    std::vector<int> reps;
    for (int h = 0; h < l.hosts; ++h) reps.push_back(rep(h));
    internal::SubCommunicator sub(comm, std::move(reps));
    BroadcastOptions between = o;
    between.comm = &sub;
    between.root = root_host;
    between.timeout = Left(deadline);
    HERD_ASSIGN_OR_RETURN(Algorithm a, FlatPick(CollectiveOp::kBroadcast, o.dtype,
                                                o.count * DTypeSize(o.dtype), l.hosts));
    if (absl::Status st = Broadcast(between, a); !st.ok()) {
      return internal::ShmFail(comm, domain, st);
    }
  }
  if (l.size_of(l.host) > 1) {
    ShmPlan bcast;
    bcast.mode = ShmMode::kBroadcast;
    bcast.dtype = o.dtype;
    bcast.data = static_cast<std::byte*>(o.data);
    bcast.regions = {internal::WholeRegion(o.count, DTypeSize(o.dtype))};
    bcast.root = l.local_of[mine];
    HERD_RETURN_IF_ERROR(internal::RunShmOperation(comm, *domain, OpKind::kBroadcast, o.tag, 0,
                                                   bcast, deadline, what));
  }
  return absl::OkStatus();
}

}  // namespace herd::collectives
