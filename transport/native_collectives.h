#pragma once
// Collectives a backend runs natively on memory the host cannot touch (NCCL on GPU buffers).
// They have exactly the contracts of the host algorithms in algorithms/collectives/ (same
// chunk layout, in place), so a caller cannot tell which one ran.

#include <cstddef>

#include "absl/status/status.h"
#include "common/deadline.h"
#include "common/dtype.h"
#include "common/reduce.h"

namespace herd::transport {

class NativeCollectives {
 public:
  virtual ~NativeCollectives() = default;
  // See collectives::ReduceScatterOptions: on return chunk rank() of data holds the reduction.
  virtual absl::Status ReduceScatter(void* data, size_t count, DType dtype, ReduceOp op,
                                     Deadline deadline) = 0;
  // See collectives::AllGatherOptions: on entry chunk rank() holds this rank's part.
  virtual absl::Status AllGather(void* data, size_t count, DType dtype, Deadline deadline) = 0;
  virtual absl::Status AllReduce(void* data, size_t count, DType dtype, ReduceOp op,
                                 Deadline deadline) = 0;
};

}  // namespace herd::transport
