#include "worker/checkpointing/params_digest.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "absl/strings/str_format.h"

namespace herd::worker {

std::string ParamsDigest(const std::vector<ModelTensor>& tensors) {
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  for (const auto& t : tensors) {
    XXH3_64bits_update(&state, t.param, t.count * sizeof(float));
  }
  return absl::StrFormat("%016x", XXH3_64bits_digest(&state));
}

}  // namespace herd::worker
