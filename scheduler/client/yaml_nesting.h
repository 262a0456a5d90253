#pragma once
// A scan of YAML text, before it is parsed, that bounds how deeply its collections nest. The
// YAML parser recurses once per level, so a file of a few kilobytes of brackets could exhaust
// the client's stack; a JobSpec nests 3 deep (tensors -> tensor -> shape).

#include <string_view>

#include "absl/status/status.h"

namespace herd::scheduler {

// INVALID_ARGUMENT naming the line where the nesting first exceeds `max_depth`. Counts flow
// collections ([ and { outside quotes and comments) and block levels (each deeper indentation,
// and each "- " that opens a sequence entry). Conservative: text that nests less may be
// counted deeper (a literal block with deep indentation), never the reverse.
absl::Status CheckYamlNesting(std::string_view text, int max_depth);

}  // namespace herd::scheduler
