#pragma once
// The durable state of one key, as the engines hand it to the store and get it back after a
// restart. Views into the engine's memory while writing; owning when loaded.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "server/keys.h"

namespace herd::server {

struct KeyRecordView {
  KeyId key;
  int64_t version = 0;
  std::span<const float> params;        // empty: unchanged since the last write (ps_ec)
  std::span<const float> slot0, slot1;  // optimizer state (empty when unused)
  std::span<const float> epsilon;       // ps_ec server residual (empty otherwise)
  std::string_view result;              // ps_ec compressed result of the last round
  std::span<const int64_t> clocks;      // ps_async per-worker clocks (empty otherwise)
  // ps_async, per worker: what a worker back in its slot adds to its executor's clock to make
  // the key's (AsyncEngine); empty or all zero when no worker came back.
  std::span<const int64_t> clock_bases;
};

struct KeyRecord {
  KeyId key;
  int64_t version = 0;
  std::vector<float> params, slot0, slot1, epsilon;
  std::string result;
  std::vector<int64_t> clocks;
  std::vector<int64_t> clock_bases;  // empty: none stored (all zero)
};

// Where the engines write. Implementations must be thread-safe (keys are written
// concurrently) and must have written durably when Write returns OK.
class KeyWriter {
 public:
  virtual ~KeyWriter() = default;
  virtual absl::Status Write(const std::string& job, const KeyRecordView& record) = 0;
  // OK when writes work now; else UNAVAILABLE naming the cause (a full or broken disk), so a
  // push can be refused before it changes anything.
  virtual absl::Status Writable() { return absl::OkStatus(); }
};

}  // namespace herd::server
