#include "server/shard_name.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>

#include "absl/strings/str_format.h"

namespace herd::server {
namespace {

constexpr size_t kMaxName = 128;  // scheduler/limits.h, kMaxNodeNameBytes

bool Valid(const std::string& name) {
  return !name.empty() && name.size() <= kMaxName &&
         std::all_of(name.begin(), name.end(), [](char c) { return c > ' ' && c < 127; });
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

std::string DefaultShardName(const std::string& host, const std::string& state_dir) {
  std::error_code ec;
  const std::string state = std::filesystem::absolute(state_dir, ec).lexically_normal().string();
  const std::string plain = "server-" + host + ":" + state;
  if (Valid(plain)) return plain;
  const std::string hash = absl::StrFormat("#%016x", Fnv1a(plain));
  std::string head = "server-" + host.substr(0, 40) + ":";
  for (char& c : head) {
    if (c <= ' ' || c >= 127) c = '_';
  }
  // The path's end says the most (its last directories); what is left of the room holds it.
  const size_t room = kMaxName - head.size() - hash.size() - 3;
  std::string tail = state.size() > room ? state.substr(state.size() - room) : state;
  for (char& c : tail) {
    if (c <= ' ' || c >= 127) c = '_';
  }
  return head + (state.size() > room ? "..." : "") + tail + hash;
}

}  // namespace herd::server
