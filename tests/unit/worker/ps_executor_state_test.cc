// The parameter-server executors' state against a real shard (gRPC on loopback, in process):
// a ps_ec job stopped after N iterations — the workers' state (residuals, momentum, the round)
// and the shard's (residual, version) exported, imported into a fresh shard and fresh
// executors — continues bit for bit as the job that never stopped; ps_sync resumes at the
// shards' version, ps_async with the clocks restarted on both sides.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/str_format.h"
#include "common/splitmix.h"
#include "common/status.h"
#include "server/engine.h"
#include "server/service.h"
#include "tests/support/spawn.h"
#include "worker/executor.h"
#include "worker/executor_state.h"

namespace herd::worker {
namespace {

using checkpoint::MemoryStateSource;
using checkpoint::ProcessState;

constexpr int kWorkers = 2;
// Tensor "w" in chunks of 6 and "b" in one chunk, both on the one shard.
const std::vector<std::pair<std::string, int64_t>> kTensors = {{"w", 10}, {"b", 3}};
constexpr int64_t kChunk = 6;

server::ShardConfig ShardJob(server::Mode mode) {
  server::ShardConfig c;
  c.job = "j";
  c.mode = mode;
  c.workers = kWorkers;
  c.optimizer.kind = optim::OptimizerConfig::Kind::kMomentum;
  c.optimizer.learning_rate = 0.25;
  c.optimizer.momentum = 0.5;
  c.staleness = server::ShardConfig::kInfiniteStaleness;
  // sign: a coarse compressor, so the residuals are large and a lost one shows.
  c.compressor = compression::Compressor::kSign;
  for (int32_t t = 0; t < static_cast<int32_t>(kTensors.size()); ++t) {
    c.tensor_names.push_back(kTensors[t].first);
    int32_t ch = 0;
    for (int64_t off = 0; off < kTensors[t].second; off += kChunk, ++ch) {
      c.keys[server::KeyId{t, ch}] =
          server::KeyPlacement{std::min(kChunk, kTensors[t].second - off), 0, off};
    }
  }
  return c;
}

// One shard process's worth: the engine behind a real gRPC server.
struct Shard {
  std::unique_ptr<server::Engine> engine;
  std::unique_ptr<server::ShardServer> server;
  server::ShardConfig config;

  explicit Shard(server::Mode mode) : config(ShardJob(mode)) {
    engine = server::Engine::Create(config, nullptr);
    auto started = server::ShardServer::Start(server::ServiceOptions{});
    EXPECT_TRUE(started.ok()) << started.status();
    server = std::move(*started);
    server->SetEngine(engine.get());
  }
  ~Shard() { server->Shutdown(); }
};

struct Model {
  std::vector<std::vector<float>> params;
  std::vector<ModelTensor> tensors;
  Model() {
    for (const auto& [name, n] : kTensors) {
      params.emplace_back(n);
      for (int64_t i = 0; i < n; ++i) params.back()[i] = 0.125f * static_cast<float>(i % 5);
    }
    for (size_t t = 0; t < kTensors.size(); ++t) {
      tensors.push_back({kTensors[t].first, params[t].data(), params[t].size()});
    }
  }
};

ExecutorContext Context(const std::string& mode, const Shard& shard, int rank, Model& m,
                        int64_t first) {
  ExecutorContext ctx;
  ctx.plan.set_job("j");
  ctx.plan.mutable_mode()->set_mode(mode);
  if (mode == "ps_ec") ctx.plan.mutable_mode()->set_compressor("sign");
  ctx.plan.set_world_size(kWorkers);
  auto* s = ctx.plan.add_servers();
  s->set_rank(0);
  s->set_address(absl::StrFormat("127.0.0.1:%d", shard.server->port()));
  for (const auto& [key, p] : shard.config.keys) {
    auto* e = ctx.plan.add_shards();
    e->set_tensor(key.tensor);
    e->set_chunk(key.chunk);
    e->set_offset(p.offset);
    e->set_count(p.count);
    e->set_server(p.server);
  }
  ctx.rank = rank;
  ctx.tensors = m.tensors;
  ctx.optimizer = shard.config.optimizer;
  ctx.timeout = std::chrono::seconds(20);
  ctx.first_iteration = first;
  return ctx;
}

float Grad(int r, int64_t it, int t, size_t i) {
  const uint64_t h = Mix64((static_cast<uint64_t>(r) << 40) ^ (static_cast<uint64_t>(it) << 20) ^
                           (static_cast<uint64_t>(t) << 12) ^ i);
  return static_cast<float>(static_cast<int64_t>(h % 2001) - 1000) / 313.0f;
}

absl::Status Drive(Executor& ex, int rank, int64_t from, int64_t to) {
  for (int64_t it = from; it < to; ++it) {
    HERD_RETURN_IF_ERROR(ex.BeginIteration(it));
    for (int t = static_cast<int>(kTensors.size()) - 1; t >= 0; --t) {
      std::vector<float> g(kTensors[t].second);
      for (size_t i = 0; i < g.size(); ++i) g[i] = Grad(rank, it, t, i);
      HERD_RETURN_IF_ERROR(ex.GradientReady(t, g));
    }
    HERD_RETURN_IF_ERROR(ex.EndBackward());
  }
  return ex.Flush();
}

// Runs `fn(rank)` on one thread per worker (a ps round needs every worker's push).
absl::Status OnEveryWorker(const std::function<absl::Status(int)>& fn) {
  std::vector<absl::Status> st(kWorkers);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorkers; ++r) threads.emplace_back([&, r] { st[r] = fn(r); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < kWorkers; ++r) {
    if (!st[r].ok())
      return absl::Status(st[r].code(), absl::StrFormat("worker %d: %s", r, st[r].message()));
  }
  return absl::OkStatus();
}

class PsResumeTest : public ::testing::TestWithParam<std::pair<std::string, server::Mode>> {};

TEST_P(PsResumeTest, ContinuesAsTheRunThatNeverStopped) {
  const auto [mode, engine_mode] = GetParam();
  constexpr int kFirst = 3, kThen = 3;
  std::vector<std::vector<std::vector<float>>> whole(kWorkers), resumed(kWorkers);
  {
    Shard shard(engine_mode);
    ASSERT_TRUE(OnEveryWorker([&](int r) -> absl::Status {
                  Model m;
                  HERD_ASSIGN_OR_RETURN(auto ex, MakeExecutor(Context(mode, shard, r, m, 0)));
                  HERD_RETURN_IF_ERROR(Drive(*ex, r, 0, kFirst + kThen));
                  whole[r] = m.params;
                  return absl::OkStatus();
                }).ok());
  }
  std::vector<ProcessState> states(kWorkers);
  {
    Shard shard(engine_mode);
    ASSERT_TRUE(OnEveryWorker([&](int r) -> absl::Status {
                  Model m;
                  HERD_ASSIGN_OR_RETURN(auto ex, MakeExecutor(Context(mode, shard, r, m, 0)));
                  HERD_RETURN_IF_ERROR(Drive(*ex, r, 0, kFirst));
                  HERD_ASSIGN_OR_RETURN(states[r], TakeExecutorState(*ex, r));
                  ExportParams(states[r], m.tensors);
                  return absl::OkStatus();
                }).ok());
    auto exported = shard.engine->ExportState(kFirst, Deadline::After(std::chrono::seconds(5)));
    ASSERT_TRUE(exported.ok()) << exported.status();
    states.push_back(std::move(*exported));
  }
  const MemoryStateSource source(states, kWorkers);
  Shard shard(engine_mode);
  ASSERT_TRUE(shard.engine->ImportState(source).ok());
  const absl::Status st = OnEveryWorker([&](int r) -> absl::Status {
    Model m;
    HERD_RETURN_IF_ERROR(ImportParams(source, {r, kWorkers}, m.tensors));
    HERD_ASSIGN_OR_RETURN(auto ex, MakeExecutor(Context(mode, shard, r, m, kFirst)));
    HERD_RETURN_IF_ERROR(ex->ImportState(source));
    HERD_RETURN_IF_ERROR(Drive(*ex, r, kFirst, kFirst + kThen));
    resumed[r] = m.params;
    return absl::OkStatus();
  });
  ASSERT_TRUE(st.ok()) << st;
  for (int r = 0; r < kWorkers; ++r) {
    for (size_t t = 0; t < kTensors.size(); ++t) {
      // ps_async is not deterministic (pushes apply in arrival order); that it trained on at
      // all is the check: clocks that disagreed between the shard and the workers would have
      // failed the first push.
      if (mode == "ps_async") continue;
      EXPECT_EQ(whole[r][t], resumed[r][t]) << mode << " worker " << r << " tensor " << t;
    }
  }
}

// A ps_sync checkpoint resumed in a collective mode: the momentum the shards kept, by key,
// becomes every worker's, by tensor (and Adam's step would be the shards' version).
TEST(PsToCollectiveTest, TheShardsMomentumGoesToTheWorkers) {
  std::vector<ProcessState> states(kWorkers);
  {
    Shard shard(server::Mode::kSync);
    ASSERT_TRUE(OnEveryWorker([&](int r) -> absl::Status {
                  Model m;
                  HERD_ASSIGN_OR_RETURN(auto ex, MakeExecutor(Context("ps_sync", shard, r, m, 0)));
                  HERD_RETURN_IF_ERROR(Drive(*ex, r, 0, 3));
                  HERD_ASSIGN_OR_RETURN(states[r], TakeExecutorState(*ex, r));
                  ExportParams(states[r], m.tensors);
                  return absl::OkStatus();
                }).ok());
    auto exported = shard.engine->ExportState(3, Deadline::After(std::chrono::seconds(5)));
    ASSERT_TRUE(exported.ok()) << exported.status();
    states.push_back(std::move(*exported));
  }
  // The shards' momentum, assembled by tensor.
  std::map<std::string, std::vector<float>> want;
  for (const auto& e : states.back().extents) {
    if (e.name.rfind("momentum/", 0) != 0) continue;
    auto& v = want[e.name];
    v.resize(e.total);
    std::memcpy(v.data() + e.offset, e.bytes.data(), e.bytes.size());
  }
  ASSERT_EQ(want.size(), kTensors.size());
  const MemoryStateSource source(states, kWorkers);
  std::mutex mu;
  std::vector<ProcessState> now;
  auto st = testing::FirstError(testing::SpawnRanks(kWorkers, [&](transport::Communicator& comm) {
    Model m;
    ExecutorContext ctx;
    ctx.plan.mutable_mode()->set_mode("allreduce");
    ctx.plan.set_world_size(kWorkers);
    ctx.rank = comm.rank();
    ctx.comm = &comm;
    ctx.tensors = m.tensors;
    ctx.optimizer = ShardJob(server::Mode::kSync).optimizer;
    HERD_ASSIGN_OR_RETURN(auto ex, MakeExecutor(ctx));
    HERD_RETURN_IF_ERROR(ex->ImportState(source));
    HERD_ASSIGN_OR_RETURN(ProcessState s, TakeExecutorState(*ex, comm.rank()));
    std::lock_guard<std::mutex> lock(mu);
    now.push_back(std::move(s));
    return absl::OkStatus();
  }));
  ASSERT_TRUE(st.ok()) << st;
  for (const ProcessState& s : now) {
    for (const auto& e : s.extents) {
      std::vector<float> v(e.count());
      std::memcpy(v.data(), e.bytes.data(), e.bytes.size());
      EXPECT_EQ(v, want.at(e.name)) << s.process << " " << e.name;
    }
    EXPECT_EQ(s.values.at("step/w"), "3");
  }
}

INSTANTIATE_TEST_SUITE_P(
    Modes, PsResumeTest,
    ::testing::Values(std::pair<std::string, server::Mode>{"ps_sync", server::Mode::kSync},
                      std::pair<std::string, server::Mode>{"ps_ec", server::Mode::kEc},
                      std::pair<std::string, server::Mode>{"ps_async", server::Mode::kAsync}),
    [](const auto& info) { return info.param.first; });

}  // namespace
}  // namespace herd::worker
