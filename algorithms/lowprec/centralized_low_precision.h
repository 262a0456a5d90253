#pragma once
// C_LP_S of the BAGUA paper (section 3.2): an all-reduce whose messages are compressed, with
// error compensation on both ends, run as a ScatterReduce (section 3.4):
//
//   1. every rank adds its residual delta to each of its P chunks and compresses them
//      (delta keeps what compression dropped: error feedback on the sender);
//   2. all-to-all of the compressed chunks: rank r receives every rank's chunk r;
//   3. rank r decompresses and sums them (in rank order), divides by P for an average, adds
//      its residual epsilon and compresses the result (error feedback on the reducer);
//   4. all-gather of the compressed reduced chunks;
//   5. every rank decompresses all P of them into `data`.
//
// With Q the compressor, D its decoder, x_j rank j's input, delta_j its residual and eps the
// owner's residual of a chunk (this is the paper's recursion with the residuals stored with
// the opposite sign: they are added, not subtracted):
//
//   v_j = x_j + delta_j                 delta_j' = v_j - D(Q(v_j))
//   s   = sum_j D(Q(v_j)) [/ P] + eps   eps'     = s - D(Q(s))          result = D(Q(s))
//
// so nothing is lost: sum_j (x_j + delta_j) + P^a eps = P^a result + sum_j delta_j' + P^a eps'
// (a = 1 with `average`, else 0), up to float rounding. Every rank decodes the same bytes, so
// `data` ends bitwise identical on all ranks, the chunk's owner included.
//
// Hosts of several ranks (the communicator's host layout, algorithms/collectives/topology.h:
// two or more hosts with the same number of ranks, shared memory working on all): the same
// steps run between hosts only, hierarchically — a full-precision shm reduce-scatter within each
// host gives the rank with local index l its host's sums of the flat chunks of rail l (the ranks
// with that index on every host), steps 1-5 run along the rail over those chunks, and a shm
// all-gather within the host spreads the decoded chunks. Compression then works where the
// network is, G times less of it; each flat chunk keeps its owner (the reducer residual stays
// where the flat layout keeps it), the sender residual is held by the rank that sends a chunk's
// host sum, and the books below still balance with x_j read as the host sums.
//
// Lives in its own folder, not in compression/: compression/ is pure codecs that the parameter
// server links without any transport; this is a collective over a Communicator.
//
// Wire: the all-to-all sends each chunk's encoding to its owner at step s = 1..P-1 (rank r to
// r + s, tag (kAllToAll, tag, s)), each compressed just before it is sent, so compression
// overlaps the wire; the all-gather moves P slots of equal size, the encoding of the largest
// chunk (smaller ones zero-padded to it), with RingAllGather (kind kAllGather).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "algorithms/collectives/options.h"
#include "algorithms/compression/compressor.h"

namespace herd::lowprec {

// Working memory of a call (about 3 count bytes and count / P floats for minmax_uint8),
// kept between calls so that a caller in a loop does not allocate, and fault in, fresh pages
// every time (measured: most of a 25M-value call on one rank). Contents are scratch; one call
// at a time per workspace.
struct LowPrecisionWorkspace {
  std::vector<std::byte> sent, received, gathered;
  std::vector<float> sum, scratch;
  std::string bytes;
};

struct CentralizedLowPrecisionOptions : collectives::CommonOptions {
  float* data = nullptr;  // in place; dtype must be fp32
  size_t count = 0;
  compression::Compressor compressor = compression::Compressor::kMinMaxUInt8;
  // The sender's residual, `count` values, updated in place (start with zeros); nullptr turns
  // error feedback off on the sender.
  float* delta = nullptr;
  // The reducer's residual, `count` values indexed like `data`: only this rank's own chunk
  // [ChunkBegin(count, P, rank), +ChunkSize) is read and written, so the residual stays with the
  // elements it belongs to when the plan changes P or the rank. nullptr: no reducer feedback.
  float* epsilon = nullptr;
  bool average = false;  // divide the sum by P (before epsilon is added)
  // Drives stochastic compressors (qsgd), mixed with the rank, the chunk and the phase so no two
  // compressions of one call share a stream; pass e.g. the iteration.
  uint64_t seed = 0;
  // Optional: reused working memory (nullptr: allocated for this call).
  LowPrecisionWorkspace* workspace = nullptr;
};

// Correct for every P >= 1 (P == 1 compresses and decodes locally, so the result carries the
// compressor's error exactly as it would with more ranks) and every count >= 0 (chunks may be
// empty). Errors: INVALID_ARGUMENT for bad options (nothing sent) or for a peer's payload that
// does not decode (the communicator is then aborted); transport errors as every collective.
// On an error `data`, `delta` and `epsilon` are unspecified.
// Messages per rank: 2 (P - 1) each way. Extra memory: 3 P slots (about 3 count bytes for
// minmax_uint8) and one own chunk of floats.
absl::Status CentralizedLowPrecisionAllReduce(const CentralizedLowPrecisionOptions& options);

}  // namespace herd::lowprec
