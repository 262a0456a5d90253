#pragma once
// D_LP_S of the BAGUA paper (section 3.2), as BAGUA's low-precision decentralized SGD runs it
// (after Tang et al. 2018, "Communication Compression for Decentralized Training", DCD-PSGD):
// ranks exchange compressed *differences* of their models, and each rank keeps replicas of its
// peers' models that it updates with the differences it receives. Every replica is bitwise the
// model its owner holds, so nothing has to be sent twice and the compression error does not
// accumulate across iterations.
//
// State of rank i: its model x_i (what its peers hold of it: `self_replica`), and the replicas
// x_j of each peer j (`peer_replicas`). The call gets y_i in `data`: the model after this
// iteration's local step (y_i = x_i - lr * g_i; y_i = x_i for pure averaging). Per element,
// with d = |N(i)| and Q/D the compressor and its decoder:
//
//   a_i  = (x_i + sum_{j in N(i)} x_j) / (d + 1)     average of the replicas
//   z_i  = (a_i - x_i) + (y_i - x_i)                 where the average and the local step lead
//   c_i  = Q(z_i)                                    sent to every peer
//   x_i <- x_i + D(c_i),   x_j <- x_j + D(c_j) for every peer j
//   data <- x_i
//
// i.e. x_i^{t+1} = x_i^t + D(Q(sum_j W_ij x_j^t - lr g_i - x_i^t)), DCD-PSGD's update. Since
// all ranks decode the same bytes with the same arithmetic, rank k's replica of i stays bitwise
// equal to i's own x_i, provided they started equal (InitDecentralizedReplicas).
//
// The peers must be the same in every call (a replica follows one peer from its
// initialisation): the ring topology, not the random one. With no peers (P == 1) the call
// sends nothing and keeps y: data unchanged, self_replica <- data.
//
// Compression is per segment of `segment_values` values (each its own message and its own
// minmax range, qsgd norms, ...), so segments pipeline: segment k+1 is compressed while k is on
// the wire.

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "algorithms/collectives/options.h"
#include "algorithms/compression/compressor.h"

namespace herd::decentralized {

struct DecentralizedLowPrecisionOptions : collectives::CommonOptions {
  float* data = nullptr;  // in: y (model after the local step); out: the new model. fp32.
  size_t count = 0;
  std::vector<int> peers;  // ascending, distinct, not this rank; fixed across calls
  // count values: this rank's model as its peers hold it. May be `data` itself for pure
  // averaging (no local step between calls).
  float* self_replica = nullptr;
  std::vector<float*> peer_replicas;  // peer_replicas[i]: count values, replica of peers[i]
  compression::Compressor compressor = compression::Compressor::kMinMaxUInt8;
  size_t segment_values = size_t{1} << 18;  // 1 MiB of fp32 per compression unit and message
  // Drives stochastic compressors (qsgd), mixed with the rank and the segment; pass e.g. the
  // iteration.
  uint64_t seed = 0;
};

// One D_LP_S step (above). Errors as every collective; a peer's payload that does not decode is
// INVALID_ARGUMENT naming it (the communicator is aborted). After an error the replicas are no
// longer consistent: initialise them again.
// Messages: ceil(count / segment_values) to and from each peer, of
// CompressedBytes(segment) bytes. Extra memory: 4 x (peers + 1) compressed segments and one
// segment of floats.
absl::Status DecentralizedLowPrecision(const DecentralizedLowPrecisionOptions& options);

// Starts the replicas: self_replica <- data, and each peer's full-precision model into its
// replica (one full-precision exchange with every peer; compressor and seed unused). Call it
// once before the first step, and again whenever the peers change.
absl::Status InitDecentralizedReplicas(const DecentralizedLowPrecisionOptions& options);

}  // namespace herd::decentralized
