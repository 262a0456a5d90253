#pragma once
// herd's torch.distributed backend, `init_process_group(backend="herd")`, as the extension
// module builds it: herd/_backend.py registers a creator with torch.distributed.Backend that
// calls CreateProcessGroup for every group torch makes (the default group and each new_group).
//
// A group is a ProcessGroupHerd (process_group.cc): herd's communicator (transport::Connect,
// UCX: shared memory on one host, TCP or RDMA between hosts) and herd's collectives, each
// operation picked by the tuned decision table (algorithms/collectives/decision_table.h).
//
// Bootstrap and failure detection:
//  - in a herd job (`session` set: `herd local -- CMD`, herd's Kubernetes manifests) the default
//    group's ranks find each other through the job's store at the scheduler, and a failure the
//    scheduler hears of (a worker declared dead after its heartbeat timeout, another process
//    failing the job) aborts the group's communicator, so every survivor's call raises naming
//    the process; subgroups bootstrap through torch's store;
//  - outside one, through the c10d store torch hands the creator (tcp://, file://, env://), as
//    gloo does, and every rank heartbeats through that store: a rank silent for
//    `heartbeat_timeout_s` (a stopped process, a lost host) aborts the communicator, naming it.
//  In both, a peer's death is seen by the communicator itself within milliseconds (UCX's watch
//  endpoints, transport/ucx/README.md).
//
// No torch headers here, so herd_module.cc stays free of them.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>

namespace herd::worker {
class Session;
}

namespace herd::python::c10d_backend {

struct GroupSetup {
  int rank = 0;
  int size = 1;
  double timeout_s = 1800;
  std::string group_id;               // torch's group name ("0" for the default group)
  std::vector<int64_t> global_ranks;  // the default group's ranks of the members (empty: all)
  // The herd job this process is a worker of (registered), or null outside herd jobs.
  std::shared_ptr<worker::Session> session;
  // Bootstrap the communicator through the session's store (the default group of a herd job)
  // rather than torch's.
  bool session_store = false;
  double heartbeat_timeout_s = 20;  // outside herd jobs
  bool check_calls = true;          // exchange call descriptors before each collective
};

// The group, as the pybind11 object of torch's ProcessGroup type. `store` is torch's
// c10d.Store for the group (a PrefixStore). Raises RuntimeError naming what failed (a rank
// that did not show up by the timeout, a rank that differs from herd's).
pybind11::object CreateProcessGroup(pybind11::handle store, const GroupSetup& setup);

}  // namespace herd::python::c10d_backend
