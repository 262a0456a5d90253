#include "engine_test_util.h"

#include <cstring>

namespace herd::server::testing {

ShardConfig SmallJob(Mode mode, int workers) {
  ShardConfig c;
  c.job = std::string(1, 'j');
  c.shard = 0;
  c.mode = mode;
  c.workers = workers;
  c.optimizer.kind = OptimizerConfig::Kind::kSgd;
  c.optimizer.learning_rate = 0.5;
  c.keys[kA] = {4, 0};
  c.keys[kB] = {3, 0};
  c.keys[kElsewhere] = {2, 1};
  return c;
}

std::string Bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

std::vector<float> Floats(const std::string& s) {
  std::vector<float> v(s.size() / sizeof(float));
  std::memcpy(v.data(), s.data(), v.size() * sizeof(float));
  return v;
}

Deadline Soon() { return Deadline::After(std::chrono::milliseconds(50)); }
Deadline Later() { return Deadline::After(std::chrono::seconds(10)); }

absl::Status RecordingWriter::Write(const std::string&, const KeyRecordView& r) {
  std::lock_guard<std::mutex> lock(mu_);
  KeyRecord& k = last_[r.key];
  k.key = r.key;
  k.version = r.version;
  k.params.assign(r.params.begin(), r.params.end());
  k.slot0.assign(r.slot0.begin(), r.slot0.end());
  k.slot1.assign(r.slot1.begin(), r.slot1.end());
  k.epsilon.assign(r.epsilon.begin(), r.epsilon.end());
  k.result = std::string(r.result);
  k.clocks.assign(r.clocks.begin(), r.clocks.end());
  ++writes_;
  return absl::OkStatus();
}

KeyRecord RecordingWriter::Last(KeyId key) {
  std::lock_guard<std::mutex> lock(mu_);
  return last_[key];
}

int RecordingWriter::writes() {
  std::lock_guard<std::mutex> lock(mu_);
  return writes_;
}

}  // namespace herd::server::testing
