#pragma once
// The inputs of `--check` and their verification. Every rank fills its buffer from a
// deterministic function of (rank, element index), so every rank can compute every other
// rank's input, and with it the exact expected result, without any communication.
//
// Values are small integers (at most 8 in magnitude, fewer for 16-bit types at large P) so
// that every partial sum is exact in fp32, fp64, fp16 and bf16 whatever order an algorithm
// adds them in: a mismatch is a bug, never rounding. A hash of the index (not a short period)
// makes a misplaced chunk show up at its first element.

#include <cstddef>
#include <cstdint>
#include <optional>

#include "bench/bench_op.h"
#include "common/dtype.h"

namespace herd::bench {

// What parts of a buffer that the operation must overwrite hold before it runs. Never an
// input value (|input| <= 8), exact in every supported dtype.
inline constexpr double kSentinel = 1000.0;

// True for the dtypes the pattern supports: fp32, fp64, fp16, bf16.
bool PatternSupports(DType dtype);

// Element `index` of rank `rank`'s input in a job of `ranks` ranks.
double InputValue(DType dtype, int ranks, int rank, uint64_t index);

// data[k] = InputValue(rank, first_index + k), k < n.
void FillRank(DType dtype, void* data, size_t n, int ranks, int rank, uint64_t first_index);
void FillConstant(DType dtype, void* data, size_t n, double value);

struct Mismatch {
  size_t index = 0;  // relative to the checked range's start
  double got = 0;
  double expected = 0;
};

// data[k] == sum over r of InputValue(r, first_index + k)?
std::optional<Mismatch> CheckSum(DType dtype, const void* data, size_t n, int ranks,
                                 uint64_t first_index);
// data[k] == InputValue(src, first_index + k)?
std::optional<Mismatch> CheckRank(DType dtype, const void* data, size_t n, int ranks, int src,
                                  uint64_t first_index);

// --- herd's layouts (the chunk layout of algorithms/collectives/options.h), root 0.
//
// `data` holds `count` elements; for alltoall it is the input and `out` the output of
// P * ChunkSize(count, P, rank) elements (unused otherwise).

void PrepareHerdInputs(BenchOp op, DType dtype, int ranks, int rank, size_t count, void* data,
                       void* out);
// The first wrong element of this rank's result, its index counted in `data` (alltoall: `out`).
std::optional<Mismatch> VerifyHerdOutputs(BenchOp op, DType dtype, int ranks, int rank,
                                          size_t count, const void* data, const void* out);

}  // namespace herd::bench
