#pragma once
// What every collective of herd shares: its options base, the chunk layout of a vector split
// over P ranks, and the algorithm names. Each operation has its own header with an options
// struct and one free function per algorithm (gloo style); all of them are written only
// against transport::Communicator.
//
// Conventions for every collective:
//  - correct for every P >= 1 and every element count >= 0; P == 1 or count == 0 return at once;
//  - dtypes fp32, fp64, fp16, bf16 (and the integer types where only copies are involved or
//    the reduction is exact); ops sum, avg, min, max;
//  - in place on `data` wherever the operation allows it; extra memory per rank is
//    O(count/P + one segment), stated per function;
//  - the options are validated first (INVALID_ARGUMENT, nothing sent);
//  - on any transport error the communicator is aborted and the error returned: its message
//    names the peer and the operation; every wait ends by `timeout` after the call began.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/dtype.h"
#include "common/reduce.h"
#include "transport/communicator.h"

namespace herd::collectives {

struct CommonOptions {
  transport::Communicator* comm = nullptr;
  DType dtype = DType::kFloat32;
  // Bucket or tensor id, < 2^20. Operations running concurrently on one communicator must use
  // different tags; the same tag may be reused once an operation has completed.
  uint32_t tag = 0;
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
};

// Chunk c of a count-element vector split in `parts`: the first count % parts chunks have
// one element more than the others. Chunk c spans [ChunkBegin(c), ChunkBegin(c + 1)).
inline size_t ChunkBegin(size_t count, int parts, int c) {
  size_t base = count / parts, extra = count % parts;
  size_t uc = static_cast<size_t>(c);
  return uc * base + (uc < extra ? uc : extra);
}
inline size_t ChunkSize(size_t count, int parts, int c) {
  return count / parts + (static_cast<size_t>(c) < count % parts ? 1 : 0);
}

enum class Algorithm : uint8_t {
  kRing = 0,
  kLinearPipeline = 1,     // "lp"
  kRecursiveDoubling = 2,  // "rd"
  kBruck = 3,              // "bruck"
  kBinomialTree = 4,       // "tree"
  kPairwise = 5,           // "pairwise" (alltoall)
  kNative = 6,             // "native": the backend's own (NCCL), via NativeCollectives
  kRecursiveHalving = 7,   // "rh": recursive-halving reduce-scatter; all-reduce: RH then RD
  kOneShot = 8,            // "oneshot": every rank exchanges with every other in one round
  kAuto = 9,               // "auto": the decision table's pick (decision_table.h)
  kShm = 10,               // "shm": through the host's shared-memory segment (all on one host)
  kHierarchical = 11,      // "hier": shm within each host, a flat algorithm between hosts
};
std::string_view AlgorithmName(Algorithm a);
absl::StatusOr<Algorithm> ParseAlgorithm(std::string_view name);

// Shared validation: comm set, tag in range, data present when count > 0.
absl::Status ValidateCommon(const CommonOptions& o, const void* data, size_t count);

}  // namespace herd::collectives
