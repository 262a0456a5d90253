#pragma once
// The one place that knows which torch herd's c10d backend builds against.
//
// torch 1.x (Debian 12's 1.13.1): a backend is a c10d::ProcessGroup; the creator registered
// with torch.distributed.Backend.register_backend returns it, and init_process_group uses it
// as the group itself.
// torch 2.x: backends derive from c10d::Backend (pytorch PR 88330); a ProcessGroup wraps one
// backend per device type, and register_backend takes `devices=["cpu", "cuda"]`. The operations
// keep their signatures, so ProcessGroupHerd compiles against either base; what 2.x needs beyond
// this file: the creator returns the Backend (torch wraps it), register_backend is called with
// devices (herd/_backend.py), and the 2.x-only virtuals (allgather_into_tensor_coalesced,
// reduce_scatter_tensor_coalesced, getBackendName's `const` overload set) are left to their
// defaults.

#include <torch/csrc/api/include/torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace herd::python::c10d_backend {

#if TORCH_VERSION_MAJOR >= 2
using BackendBase = ::c10d::Backend;
#else
using BackendBase = ::c10d::ProcessGroup;
#endif

}  // namespace herd::python::c10d_backend
