#include "bench/pattern.h"

#include <algorithm>

#include "algorithms/collectives/options.h"
#include "common/half.h"

namespace herd::bench {
namespace {

using collectives::ChunkBegin;
using collectives::ChunkSize;

// Encoders/decoders between double and each element type; the values are small integers, so
// every conversion is exact.
struct F32 {
  using T = float;
  static T Enc(double v) { return static_cast<float>(v); }
  static double Dec(T v) { return v; }
};
struct F64 {
  using T = double;
  static T Enc(double v) { return v; }
  static double Dec(T v) { return v; }
};
struct F16 {
  using T = uint16_t;
  static T Enc(double v) { return FloatToFP16(static_cast<float>(v)); }
  static double Dec(T v) { return FP16ToFloat(v); }
};
struct BF16 {
  using T = uint16_t;
  static T Enc(double v) { return FloatToBF16(static_cast<float>(v)); }
  static double Dec(T v) { return BF16ToFloat(v); }
};

template <typename Fn>
void WithCodec(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32:
      return fn(F32{});
    case DType::kFloat64:
      return fn(F64{});
    case DType::kFloat16:
      return fn(F16{});
    case DType::kBFloat16:
      return fn(BF16{});
    default:
      return;  // PatternSupports() is false: callers validate first.
  }
}

// Largest |value|: the sum over all ranks must stay an exactly representable integer
// (fp16 holds integers up to 2048 exactly, bf16 up to 256).
int Amplitude(DType dtype, int ranks) {
  int limit = 1 << 20;
  if (dtype == DType::kFloat16) limit = 2048;
  if (dtype == DType::kBFloat16) limit = 256;
  return std::clamp(limit / std::max(ranks, 1), 1, 8);
}

// splitmix64's finaliser over (index, rank).
inline int Hashed(uint64_t index, int rank, int amplitude) {
  uint64_t x =
      index * 0x9E3779B97F4A7C15ull + (static_cast<uint64_t>(rank) + 1) * 0xD1B54A32D192ED03ull;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  const uint32_t span = 2u * static_cast<uint32_t>(amplitude) + 1u;
  return static_cast<int>((x >> 32) % span) - amplitude;
}

}  // namespace

bool PatternSupports(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat64 || dtype == DType::kFloat16 ||
         dtype == DType::kBFloat16;
}

double InputValue(DType dtype, int ranks, int rank, uint64_t index) {
  return Hashed(index, rank, Amplitude(dtype, ranks));
}

void FillRank(DType dtype, void* data, size_t n, int ranks, int rank, uint64_t first_index) {
  const int a = Amplitude(dtype, ranks);
  WithCodec(dtype, [&](auto codec) {
    using C = decltype(codec);
    auto* p = static_cast<typename C::T*>(data);
    for (size_t k = 0; k < n; ++k) p[k] = C::Enc(Hashed(first_index + k, rank, a));
  });
}

void FillConstant(DType dtype, void* data, size_t n, double value) {
  WithCodec(dtype, [&](auto codec) {
    using C = decltype(codec);
    auto* p = static_cast<typename C::T*>(data);
    std::fill(p, p + n, C::Enc(value));
  });
}

// The first k < n whose element differs from expected(first_index + k).
template <typename Expected>
std::optional<Mismatch> FirstMismatch(DType dtype, const void* data, size_t n, uint64_t first_index,
                                      Expected expected) {
  std::optional<Mismatch> bad;
  WithCodec(dtype, [&](auto codec) {
    using C = decltype(codec);
    const auto* p = static_cast<const typename C::T*>(data);
    for (size_t k = 0; k < n && !bad; ++k) {
      const int want = expected(first_index + k);
      if (const double got = C::Dec(p[k]); got != want) bad = Mismatch{k, got, double(want)};
    }
  });
  return bad;
}

std::optional<Mismatch> CheckSum(DType dtype, const void* data, size_t n, int ranks,
                                 uint64_t first_index) {
  const int a = Amplitude(dtype, ranks);
  return FirstMismatch(dtype, data, n, first_index, [&](uint64_t index) {
    int sum = 0;
    for (int r = 0; r < ranks; ++r) sum += Hashed(index, r, a);
    return sum;
  });
}

std::optional<Mismatch> CheckRank(DType dtype, const void* data, size_t n, int ranks, int src,
                                  uint64_t first_index) {
  const int a = Amplitude(dtype, ranks);
  return FirstMismatch(dtype, data, n, first_index,
                       [&](uint64_t index) { return Hashed(index, src, a); });
}

void PrepareHerdInputs(BenchOp op, DType dtype, int ranks, int rank, size_t count, void* data,
                       void* out) {
  const size_t esize = DTypeSize(dtype);
  auto* bytes = static_cast<std::byte*>(data);
  switch (op) {
    case BenchOp::kAllReduce:
    case BenchOp::kReduceScatter:
    case BenchOp::kReduce:
      FillRank(dtype, data, count, ranks, rank, 0);
      return;
    case BenchOp::kAllGather: {
      // Only this rank's chunk is input; the rest must be overwritten by the gather.
      FillConstant(dtype, data, count, kSentinel);
      const size_t begin = ChunkBegin(count, ranks, rank);
      FillRank(dtype, bytes + begin * esize, ChunkSize(count, ranks, rank), ranks, rank, begin);
      return;
    }
    case BenchOp::kBroadcast:
      if (rank == 0) {
        FillRank(dtype, data, count, ranks, 0, 0);
      } else {
        FillConstant(dtype, data, count, kSentinel);
      }
      return;
    case BenchOp::kAllToAll:
      FillRank(dtype, data, count, ranks, rank, 0);
      FillConstant(dtype, out, static_cast<size_t>(ranks) * ChunkSize(count, ranks, rank),
                   kSentinel);
      return;
  }
}

std::optional<Mismatch> VerifyHerdOutputs(BenchOp op, DType dtype, int ranks, int rank,
                                          size_t count, const void* data, const void* out) {
  const size_t esize = DTypeSize(dtype);
  const auto* bytes = static_cast<const std::byte*>(data);
  // Shifts a mismatch found in a sub-range to an index in the whole buffer.
  auto at = [](std::optional<Mismatch> m, size_t offset) {
    if (m) m->index += offset;
    return m;
  };
  switch (op) {
    case BenchOp::kAllReduce:
      return CheckSum(dtype, data, count, ranks, 0);
    case BenchOp::kReduceScatter: {
      // Only this rank's chunk is defined; the others hold partial sums.
      const size_t begin = ChunkBegin(count, ranks, rank);
      return at(CheckSum(dtype, bytes + begin * esize, ChunkSize(count, ranks, rank), ranks, begin),
                begin);
    }
    case BenchOp::kAllGather:
      for (int c = 0; c < ranks; ++c) {
        const size_t begin = ChunkBegin(count, ranks, c);
        auto m =
            CheckRank(dtype, bytes + begin * esize, ChunkSize(count, ranks, c), ranks, c, begin);
        if (m) return at(m, begin);
      }
      return std::nullopt;
    case BenchOp::kBroadcast:
      return CheckRank(dtype, data, count, ranks, 0, 0);
    case BenchOp::kReduce:
      if (rank != 0) return std::nullopt;  // scratch on every rank but the root
      return CheckSum(dtype, data, count, ranks, 0);
    case BenchOp::kAllToAll: {
      // Block j of the output is chunk `rank` of rank j's input.
      const size_t block = ChunkSize(count, ranks, rank);
      const size_t src_begin = ChunkBegin(count, ranks, rank);
      const auto* o = static_cast<const std::byte*>(out);
      for (int j = 0; j < ranks; ++j) {
        auto m = CheckRank(dtype, o + j * block * esize, block, ranks, j, src_begin);
        if (m) return at(m, j * block);
      }
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace herd::bench
