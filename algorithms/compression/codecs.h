#pragma once
// The byte layouts of the compressors (compressor.h documents them). Decoders assume the
// caller checked the size; they still check the header values a peer controls.

#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/status.h"

namespace herd::compression::internal {

size_t MinMaxBytes(size_t count);
void MinMaxEncode(std::span<const float> in, uint8_t* out);
absl::Status MinMaxDecode(const uint8_t* in, std::span<float> out, bool add);

size_t SignBytes(size_t count);
void SignEncode(std::span<const float> in, uint8_t* out);
absl::Status SignDecode(const uint8_t* in, std::span<float> out, bool add);

}  // namespace herd::compression::internal
