#pragma once
// Spar-All-Gather (SAG) of SparDL: synchronises the teams after Spar-Reduce-Scatter. It runs
// among the ranks holding the same block in every team (`across`: member t is team t's rank at
// this position). On entry *own is this team's reduction of the block (at most k entries); on
// return it is every team's reduction, sparsified to at most k entries, bitwise identical on
// all members. What a SAG selection discards is split evenly among the members that computed
// it and added into this rank's working vector at the block (global residual collection: the
// in-procedure residual stays on the ranks that discarded it).
// Internal to algorithms/sparse.

#include <cstddef>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "algorithms/sparse/coo.h"
#include "algorithms/sparse/schedule.h"
#include "algorithms/sparse/sparse_allreduce.h"
#include "algorithms/sparse/topk.h"
#include "algorithms/sparse/wire.h"
#include "algorithms/sparse/working_vector.h"

namespace herd::sparse {

// R-SAG (across.size a power of two): in exchange s member t swaps its block with member
// t XOR 2^s, both add the two blocks and keep the top k. After exchange s the 2^(s+1) members
// of a group hold the same block, so each of them keeps 1/2^(s+1) of every discarded value
// (exact in fp32: a power-of-two scaling), and the discarded mass is counted exactly once.
absl::Status RecursiveSag(Wire& wire, const Group& across, size_t k, TopkMethod method,
                          WorkingVector& w, int block, size_t length, CooBlock* own,
                          TopkScratch* scratch);

// B-SAG (any number of teams T): each member keeps only its top k' = BsagKeep(...) entries (the
// rest goes back into the working vector), Bruck-all-gathers them across the teams without
// selecting in between, adds them up in team order (so every member computes the same sum) and
// keeps the top k; each member takes 1/T of what that last selection discards. Then the state is
// moved by BsagUpdate with the number of entries the sum held. state == nullptr: a fresh state.
absl::Status BruckSag(Wire& wire, const Group& across, size_t k, TopkMethod method,
                      BsagState* state, WorkingVector& w, int block, size_t length, CooBlock* own,
                      TopkScratch* scratch);

// The controller of B-SAG's extra top-k (see BsagState): a state not started begins at
// ratio = step = 1/T, direction up.
// k' = clamp(round(ratio * k), 1, k).
size_t BsagKeep(const BsagState& state, size_t k, int teams);
// After a call whose gathered sum held `gathered` entries: direction = down if gathered > k,
// else up; the step doubles if the direction is unchanged, halves if it turned (bounded to
// [span/64, span], span = 1 - 1/T); then ratio moves one step in that direction, clamped to
// [1/T, 1].
void BsagUpdate(BsagState* state, size_t gathered, size_t k, int teams);

}  // namespace herd::sparse
