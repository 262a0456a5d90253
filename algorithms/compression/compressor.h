#pragma once
// Lossy gradient compressors shared by the collectives (clps, decentralized_lp) and the
// parameter server (ps_ec). Each compressor turns `count` fp32 values into a byte string of a
// size that depends only on `count`, and back. Pure functions: no state, thread-safe.
//
//   minmax_uint8: [float min][float max][count x uint8]; value = min + q * (max - min) / 255,
//                 q rounded to nearest. Exact for constant inputs.
//   sign:         [float scale][ceil(count / 8) bytes of sign bits, LSB first]; value =
//                 +scale for a set bit, -scale otherwise, scale = mean |x| (scaled 1-bit sign).
//
// Decompress validates everything a peer can get wrong (size, non-finite header values) and
// answers INVALID_ARGUMENT without touching `out`.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace herd::compression {

enum class Compressor : uint8_t { kMinMaxUInt8, kSign };

// "minmax_uint8" | "sign". INVALID_ARGUMENT names the accepted ones.
absl::StatusOr<Compressor> ParseCompressor(std::string_view name);
std::string_view CompressorName(Compressor c);

// The exact size of Compress's output for `count` values.
size_t CompressedBytes(Compressor c, size_t count);

// Writes Q(in) to `out` (resized to CompressedBytes). Non-finite inputs are clamped to the
// finite float range so the header stays finite.
void Compress(Compressor c, std::span<const float> in, std::string* out);

// out = D(bytes). INVALID_ARGUMENT when `bytes` is not a valid encoding of out.size() values.
absl::Status Decompress(Compressor c, std::string_view bytes, std::span<float> out);

// Like Decompress but adds D(bytes) into `acc` (the parameter server's sum).
absl::Status DecompressAdd(Compressor c, std::string_view bytes, std::span<float> acc);

}  // namespace herd::compression
