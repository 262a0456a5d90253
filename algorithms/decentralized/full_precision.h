#pragma once
// D_FP_S of the BAGUA paper (section 3.2): each rank averages its model with its peers of this
// iteration, in full precision. Two exchanges (docs/decentralized.md, "D_FP_S"):
//
//   kWholeModel  every peer gets the whole model: x_i' = (x_i + sum_{j in N(i)} x_j) / (d + 1)
//                (the paper writes the sum over the neighbourhood; 1 / (d + 1) are the uniform
//                weights its ring and random selections imply). A rank sends d copies.
//   kHalves      with exactly two peers (a ring, or the triple of an odd pairing) the rank's
//                successor gets the first half of the model and its predecessor the second,
//                and each half is averaged with the one neighbour it came from:
//                  x_i'[first]  = (x_i[first]  + x_pred[first])  / 2
//                  x_i'[second] = (x_i[second] + x_succ[second]) / 2
//                A rank sends its model once: on a link capped per host, half the bytes of
//                kWholeModel and less than a ring all-reduce's 2 (P - 1) / P. With one peer
//                it is kWholeModel. The successor is the peer p with the smallest
//                (p - rank) mod P, which makes the two peers' roles agree on a ring in rank
//                order and on any triple.
//
// Both mixing matrices are doubly stochastic, so the global mean is preserved exactly (up to
// float rounding) and repeated averaging converges to it; kWholeModel's is also symmetric.
//
// The peers come from the plan (plan/topology.h); the relation must be symmetric (a lists
// b iff b lists a) or the call ends by its deadline. The sum is taken in ascending peer order
// after the own model, the same on every rank.

#include <vector>

#include "absl/status/status.h"
#include "algorithms/collectives/options.h"

namespace herd::decentralized {

enum class Exchange { kWholeModel, kHalves };

struct DecentralizedFullPrecisionOptions : collectives::CommonOptions {
  void* data = nullptr;  // in place; fp32, fp64, fp16 or bf16
  size_t count = 0;
  std::vector<int> peers;  // this iteration's peers: ascending, distinct, not this rank
  Exchange exchange = Exchange::kHalves;
  size_t segment_bytes = size_t{1} << 20;  // largest single message (pipelining unit)
};

// No peers (P == 1, or a rank left out): returns at once, `data` unchanged.
// Messages: ceil(bytes / segment_bytes) to and from each peer, bytes being the whole model
// (kWholeModel) or its half (kHalves, two peers). Extra memory: 4 x peers x segment_bytes.
// Errors as every collective (options.h).
absl::Status DecentralizedFullPrecision(const DecentralizedFullPrecisionOptions& options);

}  // namespace herd::decentralized
