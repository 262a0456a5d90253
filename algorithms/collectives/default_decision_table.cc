// The decision table compiled into herd: measured with `herd bench collectives --tune` on the
// project's reference machine (docs/BENCHMARKS.md, "Decision table"), fp32, for 2, 3, 4 and 8
// ranks. Other element sizes and rank counts use the nearest group (decision_table.h).

#include "algorithms/collectives/decision_table.h"

namespace herd::collectives {

const char* DefaultDecisionTableText() {
  return R"(# herd collectives decision table (algorithms/collectives/decision_table.h)
allreduce 2 4 16384 oneshot
allreduce 2 4 1048576 rh
allreduce 2 4 inf ring
reduce_scatter 2 4 65536 oneshot
reduce_scatter 2 4 1048576 rh
reduce_scatter 2 4 inf ring
allgather 2 4 65536 oneshot
allgather 2 4 1048576 rd
allgather 2 4 inf ring
allreduce 3 4 16384 oneshot
allreduce 3 4 1048576 rh
allreduce 3 4 inf ring
reduce_scatter 3 4 65536 oneshot
reduce_scatter 3 4 1048576 rh
reduce_scatter 3 4 inf ring
allgather 3 4 65536 oneshot
allgather 3 4 1048576 rd
allgather 3 4 inf ring
allreduce 4 4 16384 oneshot
allreduce 4 4 1048576 rh
allreduce 4 4 inf ring
reduce_scatter 4 4 65536 oneshot
reduce_scatter 4 4 1048576 rh
reduce_scatter 4 4 inf ring
allgather 4 4 65536 oneshot
allgather 4 4 1048576 rd
allgather 4 4 inf ring
allreduce 8 4 16384 oneshot
allreduce 8 4 1048576 rh
allreduce 8 4 inf ring
reduce_scatter 8 4 65536 oneshot
reduce_scatter 8 4 1048576 rh
reduce_scatter 8 4 inf ring
allgather 8 4 65536 oneshot
allgather 8 4 1048576 rd
allgather 8 4 inf ring
)";
}

}  // namespace herd::collectives
