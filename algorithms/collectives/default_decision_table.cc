// The decision table compiled into herd: measured with `herd bench collectives --tune` on the
// project's reference machine (docs/BENCHMARKS.md, "Decision table"), fp32, for 2, 3, 4 and 8
// ranks. Other element sizes and rank counts use the nearest group (decision_table.h).

#include "algorithms/collectives/decision_table.h"

namespace herd::collectives {

const char* DefaultDecisionTableText() {
  return R"(# herd collectives decision table (algorithms/collectives/decision_table.h)
# Measured 2026-11-27 with `herd bench collectives --tune` (1K..16M at P = 4, median of 3
# rounds; 1K..4M at P = 2, 3, 8, one round) on the shared 2-core machine at load 17-30.
# op ranks dtype_bytes up_to_bytes algorithm
allreduce 2 4 32768 oneshot
allreduce 2 4 524288 tree
allreduce 2 4 inf rh
reduce_scatter 2 4 32768 ring
reduce_scatter 2 4 2097152 oneshot
reduce_scatter 2 4 inf ring
allgather 2 4 2048 bruck
allgather 2 4 8192 rd
allgather 2 4 32768 ring
allgather 2 4 524288 rd
allgather 2 4 2097152 ring
allgather 2 4 inf oneshot
allreduce 3 4 8192 rd
allreduce 3 4 32768 tree
allreduce 3 4 131072 ring
allreduce 3 4 524288 lp
allreduce 3 4 inf rh
reduce_scatter 3 4 2048 rh
reduce_scatter 3 4 8192 oneshot
reduce_scatter 3 4 32768 rh
reduce_scatter 3 4 524288 oneshot
reduce_scatter 3 4 2097152 ring
reduce_scatter 3 4 inf rh
allgather 3 4 8192 oneshot
allgather 3 4 32768 ring
allgather 3 4 131072 oneshot
allgather 3 4 524288 ring
allgather 3 4 2097152 oneshot
allgather 3 4 inf ring
allreduce 4 4 2048 lp
allreduce 4 4 8192 oneshot
allreduce 4 4 524288 tree
allreduce 4 4 inf lp
reduce_scatter 4 4 8192 rh
reduce_scatter 4 4 32768 oneshot
reduce_scatter 4 4 inf ring
allgather 4 4 2048 bruck
allgather 4 4 8192 ring
allgather 4 4 131072 oneshot
allgather 4 4 inf ring
allreduce 8 4 2097152 tree
allreduce 8 4 inf lp
reduce_scatter 8 4 32768 rh
reduce_scatter 8 4 524288 ring
reduce_scatter 8 4 2097152 rh
reduce_scatter 8 4 inf ring
allgather 8 4 8192 bruck
allgather 8 4 inf rd
)";
}

}  // namespace herd::collectives
