// The decision table compiled into herd: measured with `herd bench collectives --tune` on the
// project's reference machine (docs/BENCHMARKS.md, "Decision table"), fp32, for 2, 3, 4 and 8
// ranks. Other element sizes and rank counts use the nearest group (decision_table.h).

#include "algorithms/collectives/decision_table.h"

namespace herd::collectives {

const char* DefaultDecisionTableText() {
  return R"(# herd collectives decision table (algorithms/collectives/decision_table.h)
# Measured 2026-11-27 18:47-18:58 UTC with `herd bench collectives --tune` (1K..16M, median of
# 3 rounds, P = 4, 2, 3, 8, the first point of every process group warmed up) on the project's
# 2-core machine, quiet (load average under 1 at the start; P ranks share its 2 cores). Above
# 16M (the largest size tuned) the ring. The P = 4 reduce-scatter: recursive halving up to 8M
# (the ring fastest at 16M: bench/tune.cc no longer holds the pick back there).
# op ranks dtype_bytes up_to_bytes algorithm
allreduce 2 4 131072 oneshot
allreduce 2 4 2097152 rh
allreduce 2 4 inf ring
reduce_scatter 2 4 8192 ring
reduce_scatter 2 4 32768 oneshot
reduce_scatter 2 4 inf ring
allgather 2 4 inf ring
allreduce 3 4 8192 oneshot
allreduce 3 4 131072 rd
allreduce 3 4 2097152 ring
allreduce 3 4 16777216 lp
allreduce 3 4 inf ring
reduce_scatter 3 4 8192 oneshot
reduce_scatter 3 4 inf ring
allgather 3 4 8192 oneshot
allgather 3 4 2097152 ring
allgather 3 4 8388608 rd
allgather 3 4 inf ring
allreduce 4 4 8192 oneshot
allreduce 4 4 32768 ring
allreduce 4 4 524288 rh
allreduce 4 4 inf ring
reduce_scatter 4 4 8388608 rh
reduce_scatter 4 4 inf ring
allgather 4 4 8388608 oneshot
allgather 4 4 inf ring
allreduce 8 4 2048 tree
allreduce 8 4 8192 rd
allreduce 8 4 524288 rh
allreduce 8 4 inf ring
reduce_scatter 8 4 8388608 rh
reduce_scatter 8 4 inf ring
allgather 8 4 8192 bruck
allgather 8 4 524288 rd
allgather 8 4 16777216 oneshot
allgather 8 4 inf ring
)";
}

}  // namespace herd::collectives
