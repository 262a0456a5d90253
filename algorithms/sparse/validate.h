#pragma once
// Validation shared by SparDL and TopA (INVALID_ARGUMENT, or FAILED_PRECONDITION for device
// memory; the message starts with `what`). Internal to algorithms/sparse.

#include <string_view>

#include "absl/status/status.h"
#include "algorithms/sparse/sparse_allreduce.h"

namespace herd::sparse {

// teams_apply: check teams and sag (SparDL); TopA ignores them.
absl::Status ValidateSparseOptions(std::string_view what, const SparseAllReduceOptions& o,
                                   bool teams_apply);

}  // namespace herd::sparse
