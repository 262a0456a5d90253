// A ps_sync job end to end: the real scheduler, two real shard processes (every-round
// durability), three workers in threads. In round kCrashRound two workers have pushed and wait
// for the third when shard 1 is SIGKILLed; it is restarted on the same state directory and
// port, the workers ride it out, and after the last round every parameter equals the closed
// form of synchronous SGD: no acknowledged update was lost and none was applied twice.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "herd/v1/job.pb.h"
#include "scheduler/client/scheduler_client.h"
#include "server/client/sharded_client.h"
#include "tests/integration/scheduler/scheduler_process.h"

namespace herd::server {
namespace {

constexpr int kWorkers = 3;
constexpr int kRounds = 8;
constexpr int kCrashRound = 4;
constexpr float kLr = 0.1f;
const std::vector<int64_t> kTensorSizes = {1000, 3000};

// One `herd server` process.
class ShardProcess : public scheduler::testing::HerdProcess {
 public:
  void Start(std::vector<std::string> args, const std::string& port_file, const std::string& log) {
    HerdProcess::Start("server", std::move(args), port_file, log, std::chrono::seconds(20));
  }
};

float Grad(int worker, int round, int tensor, int64_t i) {
  return 0.01f * static_cast<float>((worker + 1) * (round + 1)) +
         1e-4f * static_cast<float>((i * 7 + tensor) % 13) - 0.002f * static_cast<float>(worker);
}

std::vector<std::vector<float>> Grads(int worker, int round) {
  std::vector<std::vector<float>> g;
  for (size_t t = 0; t < kTensorSizes.size(); ++t) {
    g.emplace_back(kTensorSizes[t]);
    for (int64_t i = 0; i < kTensorSizes[t]; ++i) g[t][i] = Grad(worker, round, t, i);
  }
  return g;
}

std::vector<std::vector<float>> Initial() {
  std::vector<std::vector<float>> p;
  for (size_t t = 0; t < kTensorSizes.size(); ++t) {
    p.emplace_back(kTensorSizes[t]);
    for (int64_t i = 0; i < kTensorSizes[t]; ++i)
      p[t][i] = 0.5f - 0.001f * static_cast<float>(i % 100);
  }
  return p;
}

class PsIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("herd_ps_it_" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (HasFailure()) {
      std::cerr << "scheduler log:\n"
                << scheduler_.log() << "\nshard 0 log:\n"
                << shards_[0].log() << "\nshard 1 log:\n"
                << shards_[1].log() << "\n";
    }
    for (auto& s : shards_) s.Stop(SIGKILL);
    scheduler_.Stop(SIGKILL);
    std::filesystem::remove_all(dir_);
  }

  std::vector<std::string> ShardArgs(int shard, int port,
                                     const std::string& durability = "every-round") {
    return {"--scheduler",  scheduler_.address(),
            "--job",        "psjob",
            "--state",      (dir_ / ("shard" + std::to_string(shard))).string(),
            "--shard",      std::to_string(shard),
            "--listen",     "127.0.0.1:" + std::to_string(port),
            "--durability", durability};
  }
  void StartShard(int shard, int port, const std::string& durability = "every-round") {
    shards_[shard].Start(ShardArgs(shard, port, durability),
                         (dir_ / ("shard" + std::to_string(shard) + ".port")).string(),
                         (dir_ / ("shard" + std::to_string(shard) + ".log")).string());
  }

  absl::StatusOr<std::unique_ptr<scheduler::SchedulerClient>> ConnectScheduler() const {
    scheduler::ClientOptions o;
    o.address = scheduler_.address();
    return scheduler::SchedulerClient::Connect(o);
  }

  std::filesystem::path dir_;
  scheduler::testing::SchedulerProcess scheduler_;
  ShardProcess shards_[2];
};

TEST_F(PsIntegrationTest, ShardKilledMidRoundRestartsAndNothingAcknowledgedIsLost) {
  scheduler_.Start((dir_ / "scheduler").string(), 0, {"--heartbeat-timeout", "1s"});
  auto sched = ConnectScheduler();
  ASSERT_TRUE(sched.ok());
  herd::v1::JobSpec spec;
  spec.set_name("psjob");
  spec.mutable_mode()->set_mode("ps_sync");
  spec.set_workers(kWorkers);
  spec.set_servers(2);
  spec.set_chunk_bytes(1024);  // 256 values: several keys per tensor, over both shards
  spec.mutable_optimizer()->set_name("sgd");
  spec.mutable_optimizer()->set_learning_rate(kLr);
  for (size_t t = 0; t < kTensorSizes.size(); ++t) {
    auto* ts = spec.add_tensors();
    ts->set_name("t" + std::to_string(t));
    ts->add_shape(kTensorSizes[t]);
    ts->set_dtype("fp32");
  }
  auto submitted = (*sched)->SubmitJob(spec);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  StartShard(0, 0);
  StartShard(1, 0);

  // The plan: the shard map and the shards' addresses (once both registered).
  herd::v1::Plan plan;
  herd::v1::WatchPlanRequest watch;
  watch.set_job("psjob");
  ASSERT_TRUE((*sched)
                  ->WatchPlan(watch, Deadline::After(std::chrono::seconds(10)),
                              [&](const herd::v1::Plan& p) {
                                plan = p;
                                return p.servers_size() < 2 || p.servers(0).address().empty() ||
                                       p.servers(1).address().empty();
                              })
                  .ok());
  ASSERT_EQ(plan.servers_size(), 2);
  ShardedOptions base;
  base.job = "psjob";
  for (const auto& m : plan.servers()) base.addresses.push_back(m.address());
  std::set<int> used;
  for (const auto& e : plan.shards()) {
    base.chunks.push_back({KeyId{e.tensor(), e.chunk()}, e.offset(), e.count(), e.server()});
    used.insert(e.server());
  }
  ASSERT_EQ(used.size(), 2u) << "both shards must own keys";

  // Worker 2 waits at the crash round until the test has killed and restarted shard 1.
  std::promise<void> restarted;
  std::shared_future<void> restarted_f = restarted.get_future().share();
  std::atomic<int> waiting_in_crash_round{0};
  std::vector<std::vector<std::vector<float>>> finals(kWorkers);
  std::vector<absl::Status> results(kWorkers);
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      auto options = base;
      options.worker = w;
      auto client = ShardedPsClient::Connect(options);
      if (!client.ok()) {
        results[w] = client.status();
        return;
      }
      if (auto st = (*client)->Init(Initial()); !st.ok()) {
        results[w] = st;
        return;
      }
      std::vector<std::vector<float>> params;
      for (int r = 0; r < kRounds; ++r) {
        if (r == kCrashRound) {
          if (w == 2) {
            restarted_f.wait();
          } else {
            waiting_in_crash_round.fetch_add(1);
          }
        }
        auto version = (*client)->PushPull(r, Grads(w, r), &params);
        if (!version.ok()) {
          results[w] = version.status();
          return;
        }
        if (*version != r + 1) {
          results[w] = absl::InternalError("round " + std::to_string(r) + " answered version " +
                                           std::to_string(*version));
          return;
        }
      }
      finals[w] = params;
    });
  }
  // Kill shard 1 while workers 0 and 1 have pushed round kCrashRound and wait for worker 2.
  while (waiting_in_crash_round.load() < 2)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // their pushes are in
  const int port1 = shards_[1].port();
  shards_[1].Stop(SIGKILL);
  StartShard(1, port1);  // same state directory, same port
  restarted.set_value();
  for (auto& t : workers) t.join();
  for (int w = 0; w < kWorkers; ++w)
    ASSERT_TRUE(results[w].ok()) << "worker " << w << ": " << results[w];

  // Synchronous SGD on the mean gradient, computed here.
  auto want = Initial();
  for (int r = 0; r < kRounds; ++r) {
    std::vector<std::vector<std::vector<float>>> g;
    for (int w = 0; w < kWorkers; ++w) g.push_back(Grads(w, r));
    for (size_t t = 0; t < want.size(); ++t) {
      for (size_t i = 0; i < want[t].size(); ++i) {
        float sum = 0;
        for (int w = 0; w < kWorkers; ++w) sum += g[w][t][i];
        want[t][i] -= kLr * (sum / kWorkers);
      }
    }
  }
  for (int w = 0; w < kWorkers; ++w) {
    ASSERT_EQ(finals[w].size(), want.size());
    for (size_t t = 0; t < want.size(); ++t) {
      for (size_t i = 0; i < want[t].size(); ++i) {
        ASSERT_NEAR(finals[w][t][i], want[t][i], 1e-5)
            << "worker " << w << " tensor " << t << " [" << i << "]";
      }
    }
  }
  // The restarted shard recovered its keys from RocksDB, not from scratch.
  int keys1 = 0;
  for (const auto& c : base.chunks) keys1 += c.server == 1;
  const std::string recovered =
      std::to_string(keys1) + " keys, " + std::to_string(keys1) + " recovered";
  EXPECT_NE(shards_[1].log().find(recovered), std::string::npos) << shards_[1].log();
  PsClientOptions o;
  o.address = base.addresses[1];
  auto c1 = PsClient::Connect(o);
  ASSERT_TRUE(c1.ok());
  auto stats = (*c1)->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->min_version(), kRounds);
  EXPECT_EQ(stats->max_version(), kRounds);
  EXPECT_TRUE((*c1)->CheckHealth().ok());
}

// ps_async with staleness 0: worker 0 runs ahead and waits for worker 1; worker 1 stops
// heartbeating, the scheduler declares it dead, the shard learns it from the plan and lets
// worker 0 go on without it.
TEST_F(PsIntegrationTest, AsyncBoundDropsAWorkerTheSchedulerDeclaredDead) {
  scheduler_.Start((dir_ / "scheduler").string(), 0, {"--heartbeat-timeout", "1s"});
  auto sched = ConnectScheduler();
  ASSERT_TRUE(sched.ok());
  herd::v1::JobSpec spec;
  spec.set_name("psjob");
  spec.mutable_mode()->set_mode("ps_async");
  spec.mutable_mode()->set_staleness(0);
  spec.set_workers(2);
  spec.set_servers(1);
  auto* ts = spec.add_tensors();
  ts->set_name("w");
  ts->add_shape(64);
  ts->set_dtype("fp32");
  ASSERT_TRUE((*sched)->SubmitJob(spec).ok());
  StartShard(0, 0);
  // Both workers register (the job starts), only worker 0 keeps heartbeating.
  std::vector<uint64_t> node(2);
  for (int w = 0; w < 2; ++w) {
    herd::v1::RegisterNodeRequest req;
    req.set_job("psjob");
    req.set_role(herd::v1::ROLE_WORKER);
    req.set_name("w" + std::to_string(w));
    req.set_requested_rank(w);
    auto reg = (*sched)->RegisterNode(req);
    ASSERT_TRUE(reg.ok()) << reg.status();
    node[w] = reg->node_id();
  }
  std::atomic<bool> stop{false};
  std::thread beats([&] {
    herd::v1::HeartbeatRequest hb;
    hb.set_job("psjob");
    hb.set_node_id(node[0]);
    while (!stop.load()) {
      (void)(*sched)->Heartbeat(hb);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  auto job = (*sched)->GetJob("psjob");
  ASSERT_TRUE(job.ok());
  ShardedOptions base;
  base.job = "psjob";
  base.addresses = {"127.0.0.1:" + std::to_string(shards_[0].port())};
  base.chunks = {{KeyId{0, 0}, 0, 64, 0}};
  base.async = true;
  auto make = [&](int w) {
    auto o = base;
    o.worker = w;
    return std::move(*ShardedPsClient::Connect(o));
  };
  auto w0 = make(0), w1 = make(1);
  const std::vector<std::vector<float>> model = {std::vector<float>(64, 1.0f)};
  const std::vector<std::vector<float>> grad = {std::vector<float>(64, 0.1f)};
  ASSERT_TRUE(w0->Init(model).ok());
  ASSERT_TRUE(w0->Push(0, grad).ok());
  ASSERT_TRUE(w1->Push(0, grad).ok());
  ASSERT_TRUE(w0->Push(1, grad).ok());  // clocks 2 and 1: the bound is reached
  std::atomic<bool> done{false};
  absl::Status ahead;
  std::thread runner([&] {
    ahead = w0->Push(2, grad);  // waits for worker 1 ...
    done.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(done.load()) << "worker 0 ran more than s = 0 ahead of a live worker";
  // ... until the scheduler declares worker 1 dead (1 s without heartbeats).
  runner.join();
  stop.store(true);
  beats.join();
  EXPECT_TRUE(ahead.ok()) << ahead;
  std::vector<std::vector<float>> params;
  auto version = w0->Pull(0, &params);
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, 4);  // every push applied once
  EXPECT_NEAR(params[0][0], 1.0f - 4 * 0.01f * 0.1f, 1e-6);
}

// checkpoint-only writes nothing per round, but a clean stop (SIGTERM) writes everything: the
// restarted shard serves the state of the last round.
TEST_F(PsIntegrationTest, CheckpointOnlyShardKeepsItsStateOverACleanStop) {
  scheduler_.Start((dir_ / "scheduler").string(), 0, {"--heartbeat-timeout", "1s"});
  auto sched = ConnectScheduler();
  ASSERT_TRUE(sched.ok());
  herd::v1::JobSpec spec;
  spec.set_name("psjob");
  spec.mutable_mode()->set_mode("ps_sync");
  spec.set_workers(1);
  spec.set_servers(1);
  spec.mutable_optimizer()->set_learning_rate(0.5);
  auto* ts = spec.add_tensors();
  ts->set_name("w");
  ts->add_shape(8);
  ts->set_dtype("fp32");
  ASSERT_TRUE((*sched)->SubmitJob(spec).ok());
  StartShard(0, 0, "checkpoint-only");
  ShardedOptions o;
  o.job = "psjob";
  o.addresses = {"127.0.0.1:" + std::to_string(shards_[0].port())};
  o.chunks = {{KeyId{0, 0}, 0, 8, 0}};
  auto w = std::move(*ShardedPsClient::Connect(o));
  ASSERT_TRUE(w->Init({std::vector<float>(8, 1.0f)}).ok());
  std::vector<std::vector<float>> params;
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(w->PushPull(r, {std::vector<float>(8, 0.5f)}, &params).ok());
  }
  const int port = shards_[0].port();
  shards_[0].Stop(SIGTERM);
  StartShard(0, port, "checkpoint-only");
  auto version = w->Pull(0, &params);
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, 3);
  EXPECT_FLOAT_EQ(params[0][0], 1.0f - 3 * 0.5f * 0.5f);
}

TEST_F(PsIntegrationTest, ShardStartedWithoutAJobJoinsTheOnlyJobWaitingForShards) {
  scheduler_.Start((dir_ / "scheduler").string(), 0);
  auto sched = ConnectScheduler();
  ASSERT_TRUE(sched.ok());
  // A collectives-only job (no shard slots) beside the parameter-server job.
  for (const auto& [name, servers] : {std::pair{"allreduce-job", 0}, std::pair{"psjob", 1}}) {
    herd::v1::JobSpec spec;
    spec.set_name(name);
    spec.mutable_mode()->set_mode(servers == 0 ? "allreduce" : "ps_sync");
    spec.set_workers(2);
    spec.set_servers(servers);
    auto* ts = spec.add_tensors();
    ts->set_name("w");
    ts->add_shape(8);
    ts->set_dtype("fp32");
    ASSERT_TRUE((*sched)->SubmitJob(spec).ok()) << name;
  }
  // The command line: only the scheduler and the state directory.
  shards_[0].Start({"--scheduler", scheduler_.address(), "--state", (dir_ / "shard0").string(),
                    "--listen", "127.0.0.1:0"},
                   (dir_ / "shard0.port").string(), (dir_ / "shard0.log").string());
  auto job = (*sched)->GetJob("psjob");
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->servers_size(), 1);
  EXPECT_TRUE(job->servers(0).alive()) << shards_[0].log();
  EXPECT_EQ(job->servers(0).address(), "127.0.0.1:" + std::to_string(shards_[0].port()));
}

}  // namespace
}  // namespace herd::server
