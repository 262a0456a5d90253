#include "algorithms/compression/compressor.h"

#include <vector>

#include "absl/strings/str_format.h"
#include "algorithms/compression/codecs.h"

namespace herd::compression {

absl::StatusOr<Compressor> ParseCompressor(std::string_view name) {
  if (name == "minmax_uint8") return Compressor::kMinMaxUInt8;
  if (name == "sign") return Compressor::kSign;
  return absl::InvalidArgumentError(absl::StrFormat(
      "unknown compressor '%s' (this build has: minmax_uint8, sign)", std::string(name)));
}

std::string_view CompressorName(Compressor c) {
  return c == Compressor::kMinMaxUInt8 ? "minmax_uint8" : "sign";
}

size_t CompressedBytes(Compressor c, size_t count) {
  switch (c) {
    case Compressor::kMinMaxUInt8:
      return internal::MinMaxBytes(count);
    case Compressor::kSign:
      return internal::SignBytes(count);
  }
  return 0;
}

void Compress(Compressor c, std::span<const float> in, std::string* out) {
  out->resize(CompressedBytes(c, in.size()));
  auto* dst = reinterpret_cast<uint8_t*>(out->data());
  if (c == Compressor::kMinMaxUInt8) {
    internal::MinMaxEncode(in, dst);
  } else {
    internal::SignEncode(in, dst);
  }
}

absl::Status Decompress(Compressor c, std::string_view bytes, std::span<float> out) {
  if (bytes.size() != CompressedBytes(c, out.size())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s payload of %d bytes does not decode to %d values (expected %d bytes)",
        std::string(CompressorName(c)), bytes.size(), out.size(), CompressedBytes(c, out.size())));
  }
  const auto* src = reinterpret_cast<const uint8_t*>(bytes.data());
  return c == Compressor::kMinMaxUInt8 ? internal::MinMaxDecode(src, out, /*add=*/false)
                                       : internal::SignDecode(src, out, /*add=*/false);
}

absl::Status DecompressAdd(Compressor c, std::string_view bytes, std::span<float> acc) {
  if (bytes.size() != CompressedBytes(c, acc.size())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s payload of %d bytes does not decode to %d values (expected %d bytes)",
        std::string(CompressorName(c)), bytes.size(), acc.size(), CompressedBytes(c, acc.size())));
  }
  const auto* src = reinterpret_cast<const uint8_t*>(bytes.data());
  return c == Compressor::kMinMaxUInt8 ? internal::MinMaxDecode(src, acc, /*add=*/true)
                                       : internal::SignDecode(src, acc, /*add=*/true);
}

}  // namespace herd::compression
