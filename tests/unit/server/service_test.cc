// The gRPC edge in one process: a real ShardServer on loopback, real PsClients. Errors arrive
// with the engine's precise codes, the token is enforced, health answers, and a push-pull
// stream returns the round's parameters.

#include "server/service.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "engine_test_util.h"
#include "server/client/ps_client.h"
#include "server/client/sharded_client.h"

namespace herd::server {
namespace {

using testing::Bytes;
using testing::Floats;

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServiceOptions options;
    options.token = "s3cret";
    auto server = ShardServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    engine_ = Engine::Create(testing::SmallJob(Mode::kSync, 1), nullptr);
  }
  std::unique_ptr<PsClient> Client(const std::string& token) {
    PsClientOptions o;
    o.address = "127.0.0.1:" + std::to_string(server_->port());
    o.token = token;
    o.call_timeout = std::chrono::seconds(5);
    return *PsClient::Connect(o);
  }
  static herd::v1::PushChunk Push(int tensor, int chunk, int64_t round, std::string data,
                                  std::string job = "j") {
    herd::v1::PushChunk p;
    p.set_job(job);
    p.set_tensor(tensor);
    p.set_chunk(chunk);
    p.set_round(round);
    p.set_dtype("fp32");
    p.set_data(std::move(data));
    return p;
  }

  std::unique_ptr<Engine> engine_;  // outlives the server (ShardServer::SetEngine)
  std::unique_ptr<ShardServer> server_;
};

TEST_F(ServiceTest, StartingShardIsUnavailableThenServes) {
  auto c = Client("s3cret");
  EXPECT_EQ(c->Stats().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(c->CheckHealth().ok());  // the process is up; the job's keys are not yet
  server_->SetEngine(engine_.get());
  auto stats = c->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->keys(), 2);
  EXPECT_EQ(stats->mode(), "ps_sync");
}

TEST_F(ServiceTest, TokenIsRequired) {
  server_->SetEngine(engine_.get());
  EXPECT_EQ(Client("")->Stats().status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Client("wrong")->Stats().status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(Client("")->CheckHealth().ok());  // probes need no secret
}

TEST_F(ServiceTest, PushPullAndPreciseErrors) {
  server_->SetEngine(engine_.get());
  auto c = Client("s3cret");
  herd::v1::InitKeyChunk init;
  init.set_job("j");
  init.set_dtype("fp32");
  init.set_values(Bytes({1, 2, 3, 4}));
  auto inited = c->InitKeys({init, init});
  ASSERT_TRUE(inited.ok()) << inited.status();
  EXPECT_EQ(inited->initialized(), 1);
  EXPECT_EQ(inited->already(), 1);

  auto answered = c->PushPull({Push(0, 0, 0, Bytes({2, 2, 2, 2}))});
  ASSERT_TRUE(answered.ok()) << answered.status();
  ASSERT_EQ(answered->size(), 1u);
  EXPECT_EQ((*answered)[0].version(), 1);
  EXPECT_EQ(Floats((*answered)[0].data()), (std::vector<float>{0, 1, 2, 3}));

  auto st = c->Push({Push(0, 0, 1, Bytes({1, 1, 1, 1}), "nope")}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound) << st;
  EXPECT_NE(st.message().find("job 'nope'"), absl::string_view::npos) << st;
  st = c->Push({Push(0, 0, 1, Bytes({1}))}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  st = c->Push({Push(1, 0, 1, Bytes({1, 1}))}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound) << st;
  EXPECT_NE(st.message().find("is on shard 1"), absl::string_view::npos) << st;
  st = c->Push({Push(0, 0, 0, Bytes({1, 1, 1, 1}))}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  st = c->Push({Push(0, 1, 0, Bytes({1, 1, 1}))}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;  // never initialised
  // The element type must be said, and be fp32: two fp64 values have the byte length of
  // four fp32 ones, and would otherwise be read as garbage.
  auto typed = [](std::string dtype) {
    auto p = Push(0, 0, 1, Bytes({1, 1, 1, 1}));
    p.set_dtype(std::move(dtype));
    return p;
  };
  st = c->Push({typed("fp64")}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("dtype fp64"), absl::string_view::npos) << st;
  st = c->Push({typed("")}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("carries no dtype"), absl::string_view::npos) << st;
  herd::v1::InitKeyChunk untyped = init;
  untyped.set_chunk(1);
  untyped.clear_dtype();
  EXPECT_EQ(c->InitKeys({untyped}).status().code(), absl::StatusCode::kInvalidArgument);
  herd::v1::InitKeyChunk stranger = init;
  stranger.set_chunk(1);
  stranger.set_worker(7);  // the job has one worker
  EXPECT_EQ(c->InitKeys({stranger}).status().code(), absl::StatusCode::kNotFound);

  // Nothing of that changed the key; the shard still serves.
  herd::v1::PullRequest pull;
  pull.set_job("j");
  pull.set_timeout_ms(100);
  auto pulled = c->Pull(pull);  // every key: (0,1) has no value yet, so the wait runs out
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kDeadlineExceeded) << pulled.status();
  EXPECT_NE(pulled.status().message().find("not initialised"), absl::string_view::npos);
  pull.add_keys()->set_tensor(0);
  pulled = c->Pull(pull);
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ((*pulled)[0].version(), 1);
  EXPECT_EQ(Floats((*pulled)[0].data()), (std::vector<float>{0, 1, 2, 3}));
  EXPECT_EQ(c->Checkpoint("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*c->Checkpoint("j"), 1);
}

// A worker may reach its shard before the scheduler has given it its keys (the shard registered
// its address first): Init and Pull wait for it, within retry_for, instead of failing the job.
TEST(ShardedClientTest, InitAndPullWaitForAShardThatIsStillStarting) {
  auto engine = Engine::Create(testing::SmallJob(Mode::kSync, 1), nullptr);
  auto server = ShardServer::Start(ServiceOptions{});
  ASSERT_TRUE(server.ok()) << server.status();
  ShardedOptions o;
  o.job = "j";
  o.addresses = {"127.0.0.1:" + std::to_string((*server)->port())};
  o.chunks = {{testing::kA, 0, 4, 0}, {testing::kB, 4, 3, 0}};
  o.retry_for = std::chrono::milliseconds(10000);
  auto client = ShardedPsClient::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  std::thread assign([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    (*server)->SetEngine(engine.get());
  });
  std::vector<float> initial = {1, 2, 3, 4, 5, 6, 7};
  const absl::Status init = (*client)->Init({initial});
  assign.join();
  ASSERT_TRUE(init.ok()) << init;
  std::vector<std::vector<float>> params;
  ASSERT_TRUE((*client)->Pull(0, &params).ok());
  EXPECT_EQ(params[0], initial);
  (*server)->Shutdown();
}

// A shard that never gets its keys: Init gives up at retry_for with the shard's UNAVAILABLE.
TEST(ShardedClientTest, InitGivesUpOnAShardThatNeverStarts) {
  auto server = ShardServer::Start(ServiceOptions{});
  ASSERT_TRUE(server.ok()) << server.status();
  ShardedOptions o;
  o.job = "j";
  o.addresses = {"127.0.0.1:" + std::to_string((*server)->port())};
  o.chunks = {{testing::kA, 0, 4, 0}};
  o.retry_for = std::chrono::milliseconds(500);
  auto client = ShardedPsClient::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  const auto start = std::chrono::steady_clock::now();
  const absl::Status init = (*client)->Init({std::vector<float>(4, 0.0f)});
  EXPECT_EQ(init.code(), absl::StatusCode::kUnavailable) << init;
  EXPECT_NE(init.message().find("starting"), std::string::npos) << init;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  (*server)->Shutdown();
}

// ps_ec through the sharded client: two workers push compressed gradients with their own
// residuals; both receive the compressed sum, and over rounds the sum of what they received
// tracks the sum of what they sent (error feedback on both sides).
TEST(ShardedClientTest, CompressedRoundsOverGrpc) {
  auto config = testing::SmallJob(Mode::kEc, 2);
  config.keys.erase(testing::kElsewhere);
  auto engine = Engine::Create(config, nullptr);
  auto server = ShardServer::Start(ServiceOptions{});
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->SetEngine(engine.get());
  ShardedOptions o;
  o.job = "j";
  o.addresses = {"127.0.0.1:" + std::to_string((*server)->port())};
  // One tensor of 7 values: (0,0) holds [0, 4), (0,1) holds [4, 7).
  o.chunks = {{testing::kA, 0, 4, 0}, {testing::kB, 4, 3, 0}};
  std::vector<std::unique_ptr<ShardedPsClient>> workers;
  for (int w = 0; w < 2; ++w) {
    auto wo = o;
    wo.worker = w;
    workers.push_back(std::move(*ShardedPsClient::Connect(wo)));
  }
  ASSERT_TRUE(workers[0]->Init({std::vector<float>(7, 0.0f)}).ok());
  std::vector<double> sent(7, 0.0), received(7, 0.0);
  for (int round = 0; round < 5; ++round) {
    std::vector<std::vector<std::vector<float>>> sums(2);
    std::vector<absl::StatusOr<int64_t>> versions(2, absl::UnknownError("not run"));
    std::vector<std::thread> threads;
    for (int w = 0; w < 2; ++w) {
      std::vector<float> g(7);
      for (int i = 0; i < 7; ++i) {
        g[i] = 0.1f * static_cast<float>((w + 1) * (i - 3)) + 0.01f * static_cast<float>(round);
        sent[i] += g[i];
      }
      threads.emplace_back([&, w, g] {
        versions[w] = workers[w]->PushPullCompressed(compression::Compressor::kMinMaxUInt8, round,
                                                     {g}, &sums[w]);
      });
    }
    for (auto& t : threads) t.join();
    for (int w = 0; w < 2; ++w) {
      ASSERT_TRUE(versions[w].ok()) << versions[w].status();
      EXPECT_EQ(*versions[w], round + 1);
    }
    EXPECT_EQ(sums[0], sums[1]);  // both workers get the same compressed sum
    for (int i = 0; i < 7; ++i) received[i] += sums[0][0][i];
  }
  for (int i = 0; i < 7; ++i) {
    // What is still owed sits in the residuals: bounded by a few quantisation steps.
    EXPECT_NEAR(received[i], sent[i], 0.05) << i;
  }
  (*server)->Shutdown();
}

TEST(ServiceTlsTest, ServesTlsAndRefusesPlaintext) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("herd_ps_tls_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string cert = (dir / "cert.pem").string(), key = (dir / "key.pem").string();
  const std::string cmd =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -addext "
      "subjectAltName=IP:127.0.0.1,DNS:localhost -keyout " +
      key + " -out " + cert + " >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "openssl cannot make a test certificate";
  auto engine = Engine::Create(testing::SmallJob(Mode::kSync, 1), nullptr);
  ServiceOptions options;
  options.tls_cert_file = cert;
  options.tls_key_file = key;
  auto server = ShardServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->SetEngine(engine.get());
  PsClientOptions o;
  o.address = "127.0.0.1:" + std::to_string((*server)->port());
  o.call_timeout = std::chrono::seconds(5);
  auto plain = *PsClient::Connect(o);
  EXPECT_EQ(plain->Stats().status().code(), absl::StatusCode::kUnavailable);
  o.tls = true;
  o.tls_ca_file = cert;
  auto tls = *PsClient::Connect(o);
  auto stats = tls->Stats();
  EXPECT_TRUE(stats.ok()) << stats.status();
  (*server)->Shutdown();
  std::filesystem::remove_all(dir);
}

TEST(ServiceTlsTest, HalfATlsConfigurationIsRefused) {
  ServiceOptions options;
  options.tls_cert_file = "/nonexistent/cert.pem";
  EXPECT_EQ(ShardServer::Start(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.tls_key_file = "/nonexistent/key.pem";
  EXPECT_EQ(ShardServer::Start(options).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace herd::server
