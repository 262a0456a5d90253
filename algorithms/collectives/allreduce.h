#pragma once
// All-reduce: on return every rank's `data` holds the reduction of all ranks' vectors.

#include "algorithms/collectives/options.h"

namespace herd::collectives {

// The default of AllReduceOptions::shm_direct_bytes: $HERD_SHM_DIRECT_BYTES, else the value
// measured on the reference machine (read once).
size_t DefaultShmDirectBytes();

struct AllReduceOptions : CommonOptions {
  void* data = nullptr;  // in place
  size_t count = 0;
  ReduceOp op = ReduceOp::kSum;
  size_t segment_bytes = size_t{1} << 20;  // ring: pipelining unit
  size_t block_bytes = size_t{256} << 10;  // linear pipeline: block size b of the paper
  // shm, hier: vectors up to this many bytes are reduced whole by every rank of a host from all
  // of its members' stages (one synchronisation), longer ones a share per rank (two).
  size_t shm_direct_bytes = DefaultShmDirectBytes();
};

// RingReduceScatter then RingAllGather (the decoupled pair DeAR schedules separately), on the
// same buffer; sum/avg/min/max, an average divided once by P after the reduce-scatter.
// 2 (P-1) S messages each way per rank. Extra memory: four segments.
// With a communicator whose memory is not host memory, runs the backend's native op.
absl::Status RingAllReduce(const AllReduceOptions& options);
// Linear Pipeline (chain 0 -> 1 -> ... -> P-1, blocks of block_bytes): reduce flowing down the
// chain, the finished blocks flowing back up. 2 ceil(n / block_bytes) messages each way on the
// inner ranks. Extra memory: two blocks (2 min(block_bytes, n)) on ranks 1..P-1, none on 0.
absl::Status LinearPipelineAllReduce(const AllReduceOptions& options);
// Binomial-tree reduce to rank 0 then binomial broadcast: for short vectors (latency-bound).
// 2 ceil(log2 P) rounds of whole vectors. Extra memory: one copy of the vector on ranks that
// have children in the tree (short messages only).
absl::Status BinomialTreeAllReduce(const AllReduceOptions& options);
// Recursive doubling on the whole vector (ranks beyond the largest power of two p2 fold into a
// partner first and get the result from it at the end): log2(p2) rounds (+2 with a fold), each
// sending and receiving the whole vector. The fewest rounds of the dependent-step algorithms;
// for short vectors. Extra memory: one copy of the vector.
absl::Status RecursiveDoublingAllReduce(const AllReduceOptions& options);
// Rabenseifner: recursive-halving reduce-scatter then recursive-doubling all-gather over p2
// equal blocks (same fold). 2 log2(p2) messages each way (+2 with a fold), moving what the
// ring moves for powers of two; for medium vectors. Extra memory: half the vector (the whole
// vector on ranks that receive a fold).
absl::Status RecursiveHalvingAllReduce(const AllReduceOptions& options);
// One round: every rank sends its whole vector to every other and sums all P in rank order.
// P-1 messages each way per rank, (P-1) n bytes sent; for short vectors only. Extra memory:
// P-1 copies of the vector.
absl::Status OneShotAllReduce(const AllReduceOptions& options);
// Shared memory, every rank on one host (shm.cc, shm_engine.h): each rank copies its vector into
// its stages of the host's segment a piece at a time, reduces its 1/P of every piece from all P
// stages in one pass, and copies the reduced pieces out: each byte read once from the buffer and
// written once, no messages, no FIFO. Up to shm_direct_bytes every rank reduces the whole
// vector itself. Extra memory: the segment (per rank: lanes x stages x stage_bytes of stages and
// 4 KiB of control, shared; none per call). FAILED_PRECONDITION when the ranks span hosts or
// shared memory is unavailable.
absl::Status ShmAllReduce(const AllReduceOptions& options);
// Hierarchical (hierarchical.cc): shm reduce-scatter within each host (local rank l gets the
// host's sum of chunk l of G), an all-reduce of chunk l among the ranks with local index l on
// every host (the rail; the table's flat pick for H ranks), shm all-gather within each host.
// Between hosts 2 (H-1)/H of the vector per host, against the flat ring's 2 (P-1)/P through one
// rank. Hosts with different numbers of ranks: shm reduce to each host's lowest rank, all-reduce
// among those, shm broadcast. Extra memory: the segment.
absl::Status HierarchicalAllReduce(const AllReduceOptions& options);

}  // namespace herd::collectives
