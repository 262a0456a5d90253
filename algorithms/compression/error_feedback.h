#pragma once
// Error feedback (error compensation) around a compressor: what compression dropped is kept
// in a residual and added to the next input, so nothing is lost over time. With residual e
// and input x:
//   v = x + e;  out = Q(v);  e' = v - D(Q(v))
// so  D(out) + e' = x + e  exactly up to float rounding: the sum of everything sent plus the
// final residual equals the sum of everything meant to be sent. This is the delta of the
// sender and the epsilon of the reducer in BAGUA's C_LP_S (the paper writes the residual with
// the opposite sign; the two conventions are the same state negated).

#include <span>
#include <string>
#include <vector>

#include "algorithms/compression/compressor.h"

namespace herd::compression {

// `residual` must have in.size() values; it is updated in place. `scratch` is working memory
// (resized as needed) so callers in a loop allocate once. `seed` is Compress's (qsgd's rounding).
void CompressWithFeedback(Compressor c, std::span<const float> in, std::span<float> residual,
                          std::string* out, std::vector<float>* scratch, uint64_t seed);
inline void CompressWithFeedback(Compressor c, std::span<const float> in, std::span<float> residual,
                                 std::string* out, std::vector<float>* scratch) {
  CompressWithFeedback(c, in, residual, out, scratch, /*seed=*/0);
}

}  // namespace herd::compression
