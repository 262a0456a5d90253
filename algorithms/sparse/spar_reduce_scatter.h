#pragma once
// Spar-Reduce-Scatter (SRS) of SparDL inside one team, on the dense working vector.
// Internal to algorithms/sparse.

#include <cstddef>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "algorithms/sparse/coo.h"
#include "algorithms/sparse/schedule.h"
#include "algorithms/sparse/topk.h"
#include "algorithms/sparse/wire.h"
#include "algorithms/sparse/working_vector.h"

namespace herd::sparse {

// Runs the rounds of SrsSchedule(team.size) over w, whose block m belongs to team member m.
// A block's top-k is taken just before it is sent, after every pair received for it was added
// in, and is moved out of w (what was not sent stays in w). After the last round this member's
// own block is sparsified once more and moved into *own (indices relative to the block).
// On return w holds exactly what this rank did not deliver, own block included.
absl::Status SparReduceScatter(Wire& wire, const Group& team, const BlockLayout& layout, size_t k,
                               TopkMethod method, WorkingVector& w, CooBlock* own,
                               TopkScratch* scratch);

}  // namespace herd::sparse
