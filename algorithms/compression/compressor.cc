// Names, sizes and the dispatch to the codecs of codecs.h.

#include "algorithms/compression/compressor.h"

#include <charconv>
#include <cstdlib>
#include <optional>
#include <ostream>

#include "absl/strings/str_format.h"
#include "algorithms/compression/codecs.h"

namespace herd::compression {
namespace {

constexpr const char* kAccepted =
    "minmax_uint8, sign, qsgd, qsgd:S (1 <= S <= 127), fp16, bf16, topk, topk:D (0 < D <= 1)";

absl::Status UnknownName(std::string_view name) {
  return absl::InvalidArgumentError(absl::StrFormat("unknown compressor '%s' (this build has: %s)",
                                                    std::string(name), kAccepted));
}

// The shortest decimal that reads back as exactly `v` (so names round-trip).
std::string ShortestDecimal(double v) {
  for (int digits = 1; digits < 17; ++digits) {
    std::string s = absl::StrFormat("%.*g", digits, v);
    if (std::strtod(s.c_str(), nullptr) == v) return s;
  }
  return absl::StrFormat("%.17g", v);
}

// The parameter after "name:", or nullopt when `name` is not "<prefix>:<something>".
std::optional<std::string_view> Parameter(std::string_view name, std::string_view prefix) {
  if (name.size() <= prefix.size() + 1 || name.substr(0, prefix.size()) != prefix ||
      name[prefix.size()] != ':') {
    return std::nullopt;
  }
  return name.substr(prefix.size() + 1);
}

absl::Status CheckSize(Compressor c, std::string_view bytes, size_t count) {
  if (bytes.size() == CompressedBytes(c, count)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("%s payload of %d bytes does not decode to %d values (expected %d bytes)",
                      CompressorName(c), bytes.size(), count, CompressedBytes(c, count)));
}

absl::Status Decode(Compressor c, std::string_view bytes, std::span<float> out, bool add) {
  if (auto st = CheckSize(c, bytes, out.size()); !st.ok()) return st;
  const auto* src = reinterpret_cast<const uint8_t*>(bytes.data());
  switch (c.kind()) {
    case Compressor::Kind::kMinMaxUInt8:
      return internal::MinMaxDecode(src, out, add);
    case Compressor::Kind::kSign:
      return internal::SignDecode(src, out, add);
    case Compressor::Kind::kQsgd:
      return internal::QsgdDecode(src, c.levels(), out, add);
    case Compressor::Kind::kFp16:
      return internal::Fp16Decode(src, out, add);
    case Compressor::Kind::kBf16:
      return internal::Bf16Decode(src, out, add);
    case Compressor::Kind::kTopK:
      return internal::TopKDecode(src, c.density(), out, add);
  }
  return absl::InvalidArgumentError("unknown compressor kind");
}

}  // namespace

absl::StatusOr<Compressor> Compressor::Qsgd(int levels) {
  if (levels < 1 || levels > kMaxQsgdLevels) {
    return absl::InvalidArgumentError(
        absl::StrFormat("qsgd levels %d out of range [1, %d]", levels, kMaxQsgdLevels));
  }
  return Compressor(Kind::kQsgd, levels, 0.0);
}

absl::StatusOr<Compressor> Compressor::TopK(double density) {
  if (!(density > 0.0 && density <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("top-k density %g out of range (0, 1]", density));
  }
  return Compressor(Kind::kTopK, 0, density);
}

absl::StatusOr<Compressor> ParseCompressor(std::string_view name) {
  if (name == "minmax_uint8") return Compressor::kMinMaxUInt8;
  if (name == "sign") return Compressor::kSign;
  if (name == "fp16") return Compressor::kFp16;
  if (name == "bf16") return Compressor::kBf16;
  if (name == "qsgd") return Compressor::Qsgd(Compressor::kDefaultQsgdLevels);
  if (name == "topk") return Compressor::TopK(Compressor::kDefaultTopKDensity);
  if (auto p = Parameter(name, "qsgd")) {
    int levels = 0;
    auto [end, ec] = std::from_chars(p->data(), p->data() + p->size(), levels);
    if (ec != std::errc() || end != p->data() + p->size()) return UnknownName(name);
    return Compressor::Qsgd(levels);
  }
  if (auto p = Parameter(name, "topk")) {
    // strtod needs a terminated string; from_chars for double is missing from older libstdc++.
    const std::string text(*p);
    char* end = nullptr;
    const double density = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size()) return UnknownName(name);
    return Compressor::TopK(density);
  }
  return UnknownName(name);
}

std::string CompressorName(Compressor c) {
  switch (c.kind()) {
    case Compressor::Kind::kMinMaxUInt8:
      return "minmax_uint8";
    case Compressor::Kind::kSign:
      return "sign";
    case Compressor::Kind::kQsgd:
      return absl::StrFormat("qsgd:%d", c.levels());
    case Compressor::Kind::kFp16:
      return "fp16";
    case Compressor::Kind::kBf16:
      return "bf16";
    case Compressor::Kind::kTopK:
      return "topk:" + ShortestDecimal(c.density());
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, Compressor c) { return os << CompressorName(c); }

size_t CompressedBytes(Compressor c, size_t count) {
  switch (c.kind()) {
    case Compressor::Kind::kMinMaxUInt8:
      return internal::MinMaxBytes(count);
    case Compressor::Kind::kSign:
      return internal::SignBytes(count);
    case Compressor::Kind::kQsgd:
      return internal::QsgdBytes(count, c.levels());
    case Compressor::Kind::kFp16:
    case Compressor::Kind::kBf16:
      return internal::HalfBytes(count);
    case Compressor::Kind::kTopK:
      return internal::TopKBytes(count, c.density());
  }
  return 0;
}

void Compress(Compressor c, std::span<const float> in, std::string* out, uint64_t seed) {
  out->resize(CompressedBytes(c, in.size()));
  auto* dst = reinterpret_cast<uint8_t*>(out->data());
  switch (c.kind()) {
    case Compressor::Kind::kMinMaxUInt8:
      return internal::MinMaxEncode(in, dst);
    case Compressor::Kind::kSign:
      return internal::SignEncode(in, dst);
    case Compressor::Kind::kQsgd:
      return internal::QsgdEncode(in, c.levels(), seed, dst);
    case Compressor::Kind::kFp16:
      return internal::Fp16Encode(in, dst);
    case Compressor::Kind::kBf16:
      return internal::Bf16Encode(in, dst);
    case Compressor::Kind::kTopK:
      return internal::TopKEncode(in, c.density(), dst);
  }
}

absl::Status Decompress(Compressor c, std::string_view bytes, std::span<float> out) {
  return Decode(c, bytes, out, /*add=*/false);
}

absl::Status DecompressAdd(Compressor c, std::string_view bytes, std::span<float> acc) {
  return Decode(c, bytes, acc, /*add=*/true);
}

}  // namespace herd::compression
