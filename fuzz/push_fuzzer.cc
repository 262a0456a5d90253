// libFuzzer target: the shard's chunk decoding and push validation. The input is a sequence of
// length-prefixed herd.v1.PushChunk / InitKeyChunk messages (as they arrive on the wire) fed
// to the three engines (ps_sync, ps_async with staleness 0 on one key, ps_ec with both
// compressors); whatever they carry, nothing may crash, and every pulled parameter must stay
// finite (a shard never serves a NaN or an infinity).

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>

#include "herd/v1/ps.pb.h"
#include "server/engine.h"

namespace herd::server {
namespace {

ShardConfig Config(Mode mode, compression::Compressor compressor) {
  ShardConfig c;
  c.job = "j";
  c.shard = 0;
  c.mode = mode;
  c.workers = 2;
  c.staleness = 1;
  c.compressor = compressor;
  c.optimizer.kind = OptimizerConfig::Kind::kAdam;
  c.optimizer.learning_rate = 0.5;
  c.keys[KeyId{0, 0}] = {4, 0};
  c.keys[KeyId{0, 1}] = {3, 0};
  c.keys[KeyId{1, 0}] = {2, 1};
  return c;
}

void CheckFinite(Engine& e) {
  for (KeyId key : e.Keys()) {
    auto p = e.Pull("j", 0, key, 0, Deadline::After(std::chrono::milliseconds(0)));
    if (!p.ok() || e.config().mode == Mode::kEc) continue;  // ps_ec serves compressed bytes
    const size_t n = p->data.size() / sizeof(float);
    for (size_t i = 0; i < n; ++i) {
      float v;
      std::memcpy(&v, p->data.data() + i * sizeof v, sizeof v);
      if (!std::isfinite(v)) std::abort();
    }
  }
}

}  // namespace
}  // namespace herd::server

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace herd::server;
  if (size < 1) return 0;
  const Mode modes[] = {Mode::kSync, Mode::kAsync, Mode::kEc, Mode::kEc};
  const auto compressor = (data[0] & 3) == 3 ? herd::compression::Compressor::kSign
                                             : herd::compression::Compressor::kMinMaxUInt8;
  auto engine = Engine::Create(Config(modes[data[0] & 3], compressor), nullptr);
  size_t at = 1;
  // Each message: one byte kind, two bytes length, the serialised message.
  while (at + 3 <= size) {
    const uint8_t kind = data[at];
    const size_t len = std::min<size_t>(size - at - 3, data[at + 1] | (data[at + 2] << 8));
    const char* msg = reinterpret_cast<const char*>(data + at + 3);
    at += 3 + len;
    // No waiting: a wait that would block ends at once with DEADLINE_EXCEEDED.
    const auto now = herd::Deadline::After(std::chrono::milliseconds(0));
    if (kind & 1) {
      herd::v1::InitKeyChunk c;
      if (!c.ParseFromArray(msg, static_cast<int>(len))) continue;
      (void)engine->Init(c.job(), KeyId{c.tensor(), c.chunk()}, c.values());
    } else {
      herd::v1::PushChunk c;
      if (!c.ParseFromArray(msg, static_cast<int>(len))) continue;
      PushArgs args{c.job(),   c.worker(), KeyId{c.tensor(), c.chunk()},
                    c.round(), c.data(),   c.dtype()};
      (void)engine->Push(args, now);
    }
  }
  CheckFinite(*engine);
  return 0;
}
