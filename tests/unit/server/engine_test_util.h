#pragma once
// Helpers of the engine and store tests: a small job, fp32 byte conversions, a writer that
// remembers the last record of each key.

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "server/engine.h"

namespace herd::server::testing {

// Keys (0,0) of 4 values and (0,1) of 3 values on shard 0; (1,0) of 2 values on shard 1.
ShardConfig SmallJob(Mode mode, int workers);

std::string Bytes(const std::vector<float>& v);
std::vector<float> Floats(const std::string& s);

inline constexpr KeyId kA{0, 0};
inline constexpr KeyId kB{0, 1};
inline constexpr KeyId kElsewhere{1, 0};

Deadline Soon();   // 50 ms
Deadline Later();  // 10 s

class RecordingWriter : public KeyWriter {
 public:
  absl::Status Write(const std::string& job, const KeyRecordView& r) override;
  KeyRecord Last(KeyId key);
  int writes();

 private:
  std::mutex mu_;
  std::map<KeyId, KeyRecord> last_;
  int writes_ = 0;
};

}  // namespace herd::server::testing
