#pragma once
// The topology-free training state of one process: what an executor, a parameter-server
// shard or the session exports and imports — for a checkpoint (export + write; read +
// import), a mode switch (export + import in memory), and a rejoining worker (export on a
// peer + send + import). DESIGN.md, "State, checkpoints and resume".
//
// Topology-free means addressed by what the state *is*, never by how this run happened to lay
// it out: a tensor's state is named after the tensor and addressed by element range, not by
// fusion bucket or rank, so a changed fusion threshold, worker count or shard map can find
// every value again.
//
// Names (the convention every exporter follows, so resharding rules can be written per kind):
//   "<kind>/<tensor>"            e.g. "param/fc1.weight", "momentum/fc1.weight",
//                                "adam_m/fc1.weight", "residual/fc1.weight"
//   "<kind>/<tensor>@<rank>"     state that belongs to one worker of a decentralized mode
//                                ("replica/fc1.weight@3": rank 3's model)
// The kinds and how each one reshards are listed in docs/checkpoint.md.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/dtype.h"

namespace herd::checkpoint {

// Elements [offset, offset + count) of the named tensor, whose full length is `total`.
// `bytes` holds count * DTypeSize(dtype) bytes, little-endian, densely packed.
struct Extent {
  std::string name;
  DType dtype = DType::kFloat32;
  int64_t total = 0;
  int64_t offset = 0;
  std::string bytes;

  int64_t count() const { return static_cast<int64_t>(bytes.size() / DTypeSize(dtype)); }
};

// Everything one process contributes to a checkpoint.
struct ProcessState {
  std::string process;  // "worker-3", "shard-1": unique within a checkpoint
  std::vector<Extent> extents;
  // Small values that are not tensors (the iteration, the data position, a tuner's
  // observations, a generator's state), as text: each exporter documents its keys.
  std::map<std::string, std::string> values;
};

}  // namespace herd::checkpoint
