// Engine::ExportState / ImportState: a shard's keys exported by tensor element range and
// imported at another shard map (2 shards -> 1 and 3, other chunk sizes) hold the same values,
// and training continues on them bit for bit; the export is the state as of the version asked
// for, even while the shard goes on serving; ps_ec's residual scales with the worker count;
// bad input leaves the engine as it was.

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <map>
#include <thread>

#include "absl/strings/str_format.h"
#include "algorithms/compression/error_feedback.h"
#include "engine_test_util.h"

namespace herd::server {
namespace {

using checkpoint::MemoryStateSource;
using checkpoint::ProcessState;
using testing::Bytes;
using testing::Floats;
using testing::Later;

// Tensors "w" (10 values) and "b" (3): chunks of at most `chunk` values dealt round-robin over
// `shards` shards.
const std::vector<std::pair<std::string, int64_t>> kTensors = {{"w", 10}, {"b", 3}};

ShardConfig Job(Mode mode, int workers, int shards, int shard, int64_t chunk) {
  ShardConfig c;
  c.job = "j";
  c.shard = shard;
  c.mode = mode;
  c.workers = workers;
  c.optimizer.kind = OptimizerConfig::Kind::kMomentum;
  c.optimizer.learning_rate = 0.25;
  c.optimizer.momentum = 0.5;
  c.staleness = ShardConfig::kInfiniteStaleness;
  int next = 0;
  for (int32_t t = 0; t < static_cast<int32_t>(kTensors.size()); ++t) {
    c.tensor_names.push_back(kTensors[t].first);
    const int64_t n = kTensors[t].second;
    int32_t ch = 0;
    for (int64_t off = 0; off < n; off += chunk, ++ch) {
      c.keys[KeyId{t, ch}] = KeyPlacement{std::min(chunk, n - off), next++ % shards, off};
    }
  }
  return c;
}

struct Shards {
  std::vector<ShardConfig> configs;
  std::vector<std::unique_ptr<Engine>> engines;

  Shards(Mode mode, int workers, int shards, int64_t chunk) {
    for (int s = 0; s < shards; ++s) {
      configs.push_back(Job(mode, workers, shards, s, chunk));
      engines.push_back(Engine::Create(configs.back(), nullptr));
    }
  }
  Engine& Of(KeyId key) { return *engines[configs[0].keys.at(key).server]; }
  const std::map<KeyId, KeyPlacement>& keys() const { return configs[0].keys; }
};

float Value(int t, int64_t i, int salt) {
  return static_cast<float>((t * 31 + i * 7 + salt * 13) % 23 - 11) / 3.0f;
}

void InitAll(Shards& s) {
  for (const auto& [key, p] : s.keys()) {
    std::vector<float> v(p.count);
    for (int64_t i = 0; i < p.count; ++i) v[i] = Value(key.tensor, p.offset + i, 0);
    ASSERT_TRUE(*s.Of(key).Init("j", key, Bytes(v)));
  }
}

// One ps_sync / ps_async round: every worker pushes a gradient for every key.
void PushRound(Shards& s, int workers, int64_t round) {
  for (int w = 0; w < workers; ++w) {
    for (const auto& [key, p] : s.keys()) {
      std::vector<float> g(p.count);
      for (int64_t i = 0; i < p.count; ++i) g[i] = Value(key.tensor, p.offset + i, round + 5 * w);
      const std::string bytes = Bytes(g);
      ASSERT_TRUE(s.Of(key).Push(PushArgs{"j", w, key, round, bytes, "fp32"}, Later()).ok());
    }
  }
}

// The whole tensors of the shards' parameters, as pulled.
std::map<std::string, std::vector<float>> Pulled(Shards& s, int64_t version) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, n] : kTensors) out[name].assign(n, 0.0f);
  for (const auto& [key, p] : s.keys()) {
    auto pulled = s.Of(key).Pull("j", 0, key, version, Later());
    EXPECT_TRUE(pulled.ok()) << pulled.status();
    if (!pulled.ok()) continue;
    const std::vector<float> v = Floats(pulled->data);
    std::copy(v.begin(), v.end(), out[kTensors[key.tensor].first].begin() + p.offset);
  }
  return out;
}

std::vector<ProcessState> ExportAll(Shards& s, int64_t version) {
  std::vector<ProcessState> states;
  for (auto& e : s.engines) {
    auto st = e->ExportState(version, Later());
    EXPECT_TRUE(st.ok()) << st.status();
    if (st.ok()) states.push_back(std::move(*st));
  }
  return states;
}

// Every extent of every state, assembled into whole tensors by name.
std::map<std::string, std::vector<float>> Assembled(const std::vector<ProcessState>& states) {
  std::map<std::string, std::vector<float>> out;
  for (const ProcessState& s : states) {
    for (const auto& e : s.extents) {
      auto& v = out[e.name];
      v.resize(e.total, -1e30f);
      std::memcpy(v.data() + e.offset, e.bytes.data(), e.bytes.size());
    }
  }
  return out;
}

Shards Imported(Mode mode, int workers, int shards, int64_t chunk, const MemoryStateSource& from) {
  Shards s(mode, workers, shards, chunk);
  for (auto& e : s.engines) {
    const absl::Status st = e->ImportState(from);
    EXPECT_TRUE(st.ok()) << st;
  }
  return s;
}

TEST(EngineStateTest, TwoShardsResumeAtOneAndThreeBitForBit) {
  constexpr int kWorkers = 2;
  Shards old(Mode::kSync, kWorkers, 2, 4);
  InitAll(old);
  for (int64_t r = 0; r < 3; ++r) PushRound(old, kWorkers, r);
  const std::vector<ProcessState> states = ExportAll(old, 3);
  ASSERT_EQ(states.size(), 2u);
  EXPECT_EQ(states[1].process, "shard-1");
  const auto saved = Assembled(states);
  ASSERT_TRUE(saved.contains("param/w") && saved.contains("momentum/b")) << saved.size();
  const MemoryStateSource source(states, kWorkers);
  const auto at3 = Pulled(old, 3);
  PushRound(old, kWorkers, 3);
  const auto at4 = Pulled(old, 4);
  for (auto [shards, chunk] : {std::pair<int, int64_t>{1, 10}, {3, 2}}) {
    Shards now = Imported(Mode::kSync, kWorkers, shards, chunk, source);
    EXPECT_EQ(Assembled(ExportAll(now, 3)), saved) << shards << " shards";
    EXPECT_EQ(Pulled(now, 3), at3);
    // One more round: the same parameters (momentum carried, versions continued).
    PushRound(now, kWorkers, 3);
    EXPECT_EQ(Pulled(now, 4), at4) << shards << " shards";
  }
}

TEST(EngineStateTest, ExportIsAsOfTheVersionWhileServing) {
  constexpr int kWorkers = 2;
  Shards s(Mode::kSync, kWorkers, 1, 4);
  InitAll(s);
  PushRound(s, kWorkers, 0);
  // Export as of version 2 while the keys are at 1: the round that takes them there is
  // captured, and the next rounds go on without waiting for the export to be collected.
  absl::StatusOr<ProcessState> exported;
  std::thread exporter([&] { exported = s.engines[0]->ExportState(2, Later()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  PushRound(s, kWorkers, 1);
  const auto at2 = Pulled(s, 2);
  exporter.join();
  PushRound(s, kWorkers, 2);
  ASSERT_TRUE(exported.ok()) << exported.status();
  const auto state = Assembled(std::vector<ProcessState>{*exported});
  EXPECT_EQ(state.at("param/w"), at2.at("w"));
  EXPECT_EQ(state.at("param/b"), at2.at("b"));
  EXPECT_EQ(exported->values.at("shard/version"), "2");
  // Too late: the keys are past version 2 now. Nothing is exported, serving goes on.
  auto late = s.engines[0]->ExportState(2, Later());
  EXPECT_TRUE(absl::IsFailedPrecondition(late.status())) << late.status();
  // And a version never reached runs out of time, naming a key.
  auto never = s.engines[0]->ExportState(9, Deadline::After(std::chrono::milliseconds(20)));
  EXPECT_TRUE(absl::IsDeadlineExceeded(never.status())) << never.status();
  PushRound(s, kWorkers, 3);
}

TEST(EngineStateTest, AsyncExportsNowAndRestartsClocks) {
  constexpr int kWorkers = 2;
  Shards old(Mode::kAsync, kWorkers, 2, 4);
  InitAll(old);
  for (int64_t r = 0; r < 2; ++r) PushRound(old, kWorkers, r);
  const std::vector<ProcessState> states = ExportAll(old, 0);
  EXPECT_EQ(states[0].values.at("clocks/w@0"), "2,2");
  const MemoryStateSource source(states, kWorkers);
  Shards now = Imported(Mode::kAsync, kWorkers, 3, 2, source);
  EXPECT_EQ(Pulled(now, 0), Pulled(old, 0));
  // Clocks restart at 0 (the workers' executors restart theirs): clock 0 is accepted.
  PushRound(now, kWorkers, 0);
}

// ps_async's versions count pushes; ps_sync's and ps_ec's count rounds, which the workers count
// from 0 after a ps_async checkpoint: resumed in those modes the keys start at round 0.
TEST(EngineStateTest, AsyncIntoARoundModeStartsAtRoundZero) {
  constexpr int kWorkers = 2;
  Shards old(Mode::kAsync, kWorkers, 2, 4);
  InitAll(old);
  for (int64_t r = 0; r < 2; ++r) PushRound(old, kWorkers, r);
  const MemoryStateSource source(ExportAll(old, 0), kWorkers);
  for (Mode mode : {Mode::kSync, Mode::kEc}) {
    Shards now = Imported(mode, kWorkers, 1, 8, source);
    for (const auto& [key, p] : now.keys()) {
      auto pulled = now.Of(key).Pull("j", 0, key, 0, Later());
      ASSERT_TRUE(pulled.ok()) << pulled.status();
      EXPECT_EQ(pulled->version, 0) << ModeName(mode);
    }
    if (mode == Mode::kSync) {
      EXPECT_EQ(Pulled(now, 0), Pulled(old, 0));
      PushRound(now, kWorkers, 0);  // round 0 is open
    }
  }
}

TEST(EngineStateTest, EcResidualScalesWithTheWorkerCount) {
  Shards old(Mode::kEc, 2, 2, 4);
  InitAll(old);
  std::vector<float> scratch;
  std::string bytes;
  for (int64_t round = 0; round < 2; ++round) {
    for (int w = 0; w < 2; ++w) {
      for (const auto& [key, p] : old.keys()) {
        std::vector<float> g(p.count), delta(p.count, 0.0f);
        for (int64_t i = 0; i < p.count; ++i) g[i] = Value(key.tensor, p.offset + i, round + w);
        compression::CompressWithFeedback(old.configs[0].compressor, g, delta, &bytes, &scratch);
        ASSERT_TRUE(old.Of(key).Push(PushArgs{"j", w, key, round, bytes, "fp32"}, Later()).ok());
      }
    }
  }
  const std::vector<ProcessState> states = ExportAll(old, 2);
  const auto saved = Assembled(states);
  ASSERT_TRUE(saved.contains("server_residual/w"));
  EXPECT_FALSE(saved.contains("param/w"));  // ps_ec's shards keep no parameters that change
  const MemoryStateSource source(states, 2);
  Shards now = Imported(Mode::kEc, 4, 1, 13, source);
  const auto imported = Assembled(ExportAll(now, 2));
  const std::vector<float>& was = saved.at("server_residual/w");
  const std::vector<float>& is = imported.at("server_residual/w");
  double mass = 0;
  for (size_t i = 0; i < was.size(); ++i) {
    EXPECT_FLOAT_EQ(is[i], was[i] * 2.0f) << i;  // added to a sum the workers divide by 4, not 2
    mass += std::abs(was[i]);
  }
  EXPECT_GT(mass, 0);
}

TEST(EngineStateTest, CollectiveCheckpointFeedsTheShards) {
  // A checkpoint of a collective mode has no shard state: the workers' replicated parameters
  // and slots (the same names) are taken.
  ProcessState worker;
  worker.process = checkpoint::WorkerProcess(0);
  std::map<std::string, std::vector<float>> want;
  for (const auto& [name, n] : kTensors) {
    std::vector<float> v(n), m(n);
    for (int64_t i = 0; i < n; ++i) {
      v[i] = Value(static_cast<int>(n), i, 1);
      m[i] = Value(static_cast<int>(n), i, 2);
    }
    checkpoint::AddExtent(worker, "param/" + name, n, 0, v);
    checkpoint::AddExtent(worker, "momentum/" + name, n, 0, m);
    want["param/" + name] = v;
    want["momentum/" + name] = m;
  }
  const MemoryStateSource source({worker}, 1);
  Shards now = Imported(Mode::kSync, 1, 2, 4, source);
  EXPECT_EQ(Assembled(ExportAll(now, 0)), want);
}

TEST(EngineStateTest, DecentralizedModelsReachTheShardsAveraged) {
  // Two workers of a decentralized mode with different models: the shards take the average.
  std::vector<ProcessState> workers(2);
  std::map<std::string, std::vector<float>> want;
  for (int r = 0; r < 2; ++r) {
    workers[r].process = checkpoint::WorkerProcess(r);
    workers[r].values["models_per_rank"] = "1";
    for (const auto& [name, n] : kTensors) {
      std::vector<float> v(n);
      for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(r * 2 + 1) * (i + 1);
      checkpoint::AddExtent(workers[r], "param/" + name, n, 0, v);
      auto& w = want["param/" + name];
      w.resize(n, 0.0f);
      for (int64_t i = 0; i < n; ++i) w[i] += v[i] / 2;  // (1 + 3) / 2 = 2 times i + 1: exact
    }
  }
  const MemoryStateSource source(workers, 2);
  Shards now = Imported(Mode::kSync, 2, 2, 4, source);
  auto got = Assembled(ExportAll(now, 0));
  for (auto it = got.begin(); it != got.end();) {
    it = it->first.rfind("param/", 0) == 0 ? std::next(it) : got.erase(it);
  }
  EXPECT_EQ(got, want);
}

TEST(EngineStateTest, BadInputLeavesTheEngineAsItWas) {
  Shards s(Mode::kSync, 1, 1, 4);
  // Nobody holds the parameters.
  const MemoryStateSource empty({}, 1);
  EXPECT_TRUE(absl::IsNotFound(s.engines[0]->ImportState(empty)));
  EXPECT_EQ(s.engines[0]->Stats().keys_initialized, 0);
  // Parameters of another length (another model).
  ProcessState worker;
  worker.process = checkpoint::WorkerProcess(0);
  checkpoint::AddExtent(worker, "param/w", 11, 0, std::vector<float>(11, 1.0f));
  checkpoint::AddExtent(worker, "param/b", 3, 0, std::vector<float>(3, 1.0f));
  const MemoryStateSource other({worker}, 1);
  EXPECT_TRUE(absl::IsFailedPrecondition(s.engines[0]->ImportState(other)));
  EXPECT_EQ(s.engines[0]->Stats().keys_initialized, 0);
  // A shard state whose key list does not parse.
  ProcessState shard;
  shard.process = ShardProcess(0);
  shard.values["shard/keys"] = "w four 4";
  const MemoryStateSource garbled({shard}, 1);
  EXPECT_TRUE(absl::IsDataLoss(s.engines[0]->ImportState(garbled)));
  EXPECT_EQ(s.engines[0]->Stats().keys_initialized, 0);
  // Exporting keys that have no value yet.
  EXPECT_TRUE(absl::IsFailedPrecondition(s.engines[0]->ExportState(0, Later()).status()));
}

}  // namespace
}  // namespace herd::server
