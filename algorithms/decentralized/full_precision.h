#pragma once
// D_FP_S of the BAGUA paper (section 3.2): each rank replaces its model by the average of its
// own and its peers' models of this iteration, in full precision:
//
//   x_i' = (x_i + sum_{j in N(i)} x_j) / (|N(i)| + 1)
//
// (the paper writes the sum over the neighbourhood; the weights 1 / (|N(i)| + 1) are the
// uniform ones its ring and random selections imply). With the peers of PeersForIteration the
// mixing matrix is symmetric and doubly stochastic, so the global mean is preserved exactly
// (up to float rounding) and repeated averaging converges to it.
//
// The peers come from the plan (decentralized/peers.h); the relation must be symmetric (a lists
// b iff b lists a) or the call ends by its deadline. The sum is taken in ascending peer order
// after the own model, the same on every rank.

#include <vector>

#include "absl/status/status.h"
#include "algorithms/collectives/options.h"

namespace herd::decentralized {

struct DecentralizedFullPrecisionOptions : collectives::CommonOptions {
  void* data = nullptr;  // in place; fp32, fp64, fp16 or bf16
  size_t count = 0;
  std::vector<int> peers;  // this iteration's peers: ascending, distinct, not this rank
  size_t segment_bytes = size_t{1} << 20;  // largest single message (pipelining unit)
};

// No peers (P == 1, or a rank left out): returns at once, `data` unchanged.
// Messages: ceil(count * element size / segment_bytes) to and from each peer. Extra memory:
// 4 x peers x segment_bytes. Errors as every collective (options.h).
absl::Status DecentralizedFullPrecision(const DecentralizedFullPrecisionOptions& options);

}  // namespace herd::decentralized
