#pragma once
// Non-owning views of byte ranges: what transports move.

#include <cstddef>
#include <cstdint>

#include "absl/types/span.h"

namespace herd {

using ConstBytes = absl::Span<const std::byte>;
using MutableBytes = absl::Span<std::byte>;

inline ConstBytes AsBytes(const void* data, size_t n) {
  return ConstBytes(static_cast<const std::byte*>(data), n);
}
inline MutableBytes AsMutableBytes(void* data, size_t n) {
  return MutableBytes(static_cast<std::byte*>(data), n);
}

}  // namespace herd
