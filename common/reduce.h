#pragma once
// Element-wise reduction kernels shared by collectives, compression and parameter servers.
// Vectorised: fp32/fp64 loops are written for auto-vectorisation; fp16 uses F16C/AVX2 when the
// CPU has it (checked once at run time); bf16 converts through integer ops that vectorise.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/dtype.h"

namespace herd {

enum class ReduceOp : uint8_t {
  kSum = 0,
  kAverage = 1,  // a sum divided by the number of contributors (done by the caller's last step)
  kMin = 2,
  kMax = 3,
};

std::string_view ReduceOpName(ReduceOp op);
absl::StatusOr<ReduceOp> ParseReduceOp(std::string_view name);  // sum, avg|average, min, max

// dst[i] = dst[i] (op) src[i], i < count. kAverage accumulates like kSum.
// dst and src may not partially overlap; dst == src is allowed.
void ReduceInto(DType dtype, ReduceOp op, void* dst, const void* src, size_t count);

// dst[i] = srcs[0][i] (op) srcs[1][i] (op) ... (op) srcs[n-1][i], i < count: the reduction of n
// vectors in one pass over each (what a shared-memory collective does with every rank's slice).
// The sources are combined in index order, except that a source dst aliases exactly is taken
// first (dst = srcs[j] means dst (op)= the others, in index order). fp16 and bf16 accumulate in
// fp32 and round once at the end (at most one rounding, against one per addition pairwise).
// kAverage accumulates like kSum. No source may partially overlap dst; n >= 1.
void ReduceMany(DType dtype, ReduceOp op, void* dst, const void* const* srcs, int n, size_t count);

// data[i] *= factor (floating types; integers are divided exactly when factor = 1/n).
void ScaleInPlace(DType dtype, void* data, size_t count, double factor);

// The collectives' common tail: for kAverage, divide by `contributors`; otherwise nothing.
inline void FinishReduction(DType dtype, ReduceOp op, void* data, size_t count, int contributors) {
  if (op == ReduceOp::kAverage && contributors > 1) {
    ScaleInPlace(dtype, data, count, 1.0 / contributors);
  }
}

}  // namespace herd
