#pragma once
// A parameter-server key: chunk `chunk` of tensor `tensor` of the job's shard map.

#include <compare>
#include <cstdint>
#include <string>

#include "absl/strings/str_format.h"

namespace herd::server {

struct KeyId {
  int32_t tensor = 0;
  int32_t chunk = 0;
  auto operator<=>(const KeyId&) const = default;
};

inline std::string KeyName(const KeyId& k) {
  return absl::StrFormat("(tensor %d, chunk %d)", k.tensor, k.chunk);
}

}  // namespace herd::server
