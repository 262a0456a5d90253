#include "algorithms/compression/error_feedback.h"

namespace herd::compression {

void CompressWithFeedback(Compressor c, std::span<const float> in, std::span<float> residual,
                          std::string* out, std::vector<float>* scratch, uint64_t seed) {
  const size_t n = in.size();
  scratch->resize(n);
  for (size_t i = 0; i < n; ++i) (*scratch)[i] = in[i] + residual[i];
  Compress(c, *scratch, out, seed);
  // The encoding of a valid buffer always decodes; decode into the residual and subtract.
  (void)Decompress(c, *out, residual);
  for (size_t i = 0; i < n; ++i) residual[i] = (*scratch)[i] - residual[i];
}

}  // namespace herd::compression
