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

// data[i] *= factor (floating types; integers are divided exactly when factor = 1/n).
void ScaleInPlace(DType dtype, void* data, size_t count, double factor);

// The collectives' common tail: for kAverage, divide by `contributors`; otherwise nothing.
inline void FinishReduction(DType dtype, ReduceOp op, void* data, size_t count, int contributors) {
  if (op == ReduceOp::kAverage && contributors > 1) {
    ScaleInPlace(dtype, data, count, 1.0 / contributors);
  }
}

}  // namespace herd
