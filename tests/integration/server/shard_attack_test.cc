// Attacks on a real `herd server` shard (and the scheduler's token check) by a client that
// holds the token, each with the code it must get and a check that nothing changed:
//   * finite gradients whose round overflows fp32: INVALID_ARGUMENT naming the key and the
//     workers; the shard keeps serving the last good round;
//   * streams that open and send nothing, against a shard with few threads: they are ended
//     after --stream-idle-timeout, and the shard answers everyone else;
//   * two authorization headers (one right, one wrong, in both orders): UNAUTHENTICATED from
//     the shard and from the scheduler, nothing done.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "herd/v1/ps.grpc.pb.h"
#include "herd/v1/scheduler.grpc.pb.h"
#include "scheduler/client/scheduler_client.h"
#include "server/client/ps_client.h"
#include "tests/integration/scheduler/scheduler_process.h"

namespace herd::server {
namespace {

namespace fs = std::filesystem;
using scheduler::testing::HerdProcess;
using scheduler::testing::SchedulerProcess;

constexpr int kValues = 8;
constexpr char kToken[] = "right-token";

std::string Floats(float v) {
  std::vector<float> f(kValues, v);
  return std::string(reinterpret_cast<const char*>(f.data()), f.size() * sizeof(float));
}

class ShardAttackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("herd_shard_attack_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "token") << kToken << "\n";
  }
  void TearDown() override {
    if (HasFailure()) {
      std::cerr << "scheduler log:\n" << scheduler_.log() << "\nshard log:\n" << shard_.log();
    }
    shard_.Stop(SIGKILL);
    scheduler_.Stop(SIGKILL);
    fs::remove_all(dir_);
  }

  // The scheduler, a ps_sync job of 2 workers and one shard with `extra` flags; both need the
  // token.
  void StartJob(std::vector<std::string> extra = {}) {
    const std::string token_file = (dir_ / "token").string();
    scheduler_.Start((dir_ / "scheduler").string(), 0, {"--token-file", token_file});
    scheduler::ClientOptions o;
    o.address = scheduler_.address();
    o.token = kToken;
    auto sched = scheduler::SchedulerClient::Connect(o);
    ASSERT_TRUE(sched.ok());
    herd::v1::JobSpec spec;
    spec.set_name("attack");
    spec.mutable_mode()->set_mode("ps_sync");
    spec.set_workers(2);
    spec.set_servers(1);
    spec.mutable_optimizer()->set_learning_rate(0.5);
    auto* t = spec.add_tensors();
    t->set_name("w");
    t->add_shape(kValues);
    t->set_dtype("fp32");
    ASSERT_TRUE((*sched)->SubmitJob(spec).ok());
    std::vector<std::string> args = {"--scheduler",  scheduler_.address(),
                                     "--job",        "attack",
                                     "--state",      (dir_ / "shard").string(),
                                     "--listen",     "127.0.0.1:0",
                                     "--token-file", token_file};
    args.insert(args.end(), extra.begin(), extra.end());
    shard_.Start("server", args, (dir_ / "shard.port").string(), (dir_ / "shard.log").string(),
                 std::chrono::seconds(20));
    PsClientOptions po;
    po.address = "127.0.0.1:" + std::to_string(shard_.port());
    po.token = kToken;
    po.call_timeout = std::chrono::seconds(10);
    auto c = PsClient::Connect(po);
    ASSERT_TRUE(c.ok());
    client_ = *std::move(c);
    herd::v1::InitKeyChunk k;
    k.set_job("attack");
    k.set_values(Floats(1.0f));
    k.set_dtype("fp32");
    ASSERT_TRUE(client_->InitKeys({k}).ok());
  }
  herd::v1::PushChunk Push(int worker, int64_t round, float g) const {
    herd::v1::PushChunk p;
    p.set_job("attack");
    p.set_worker(worker);
    p.set_round(round);
    p.set_data(Floats(g));
    p.set_dtype("fp32");
    return p;
  }
  // The key's version and first value, and the shard's counters.
  std::pair<int64_t, float> Now() {
    herd::v1::PullRequest req;
    req.set_job("attack");
    auto got = client_->Pull(req);
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok() || got->empty()) return {-1, 0};
    float first = 0;
    std::memcpy(&first, (*got)[0].data().data(), sizeof first);
    return {(*got)[0].version(), first};
  }
  std::shared_ptr<grpc::Channel> Channel(int port) const {
    return grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                               grpc::InsecureChannelCredentials());
  }

  fs::path dir_;
  SchedulerProcess scheduler_;
  HerdProcess shard_;
  std::unique_ptr<PsClient> client_;
};

TEST_F(ShardAttackTest, FiniteGradientsWhoseRoundOverflowsAreRefusedNamingKeyAndWorkers) {
  StartJob();
  // Round 0, good: mean 1, lr 0.5. Worker 0's push is acknowledged once the round completes.
  std::thread first([&] { EXPECT_TRUE(client_->Push({Push(0, 0, 1)}).ok()); });
  ASSERT_TRUE(client_->Push({Push(1, 0, 1)}).ok());
  first.join();
  ASSERT_EQ(Now(), std::make_pair(int64_t{1}, 0.5f));

  // Round 1: 3e38 from each worker; their mean overflows.
  std::thread waiter([&] {
    auto st = client_->Push({Push(0, 1, 3e38f)});
    EXPECT_TRUE(absl::IsInvalidArgument(st.status())) << st.status();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto refused = client_->Push({Push(1, 1, 3e38f)});
  waiter.join();
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_NE(refused.status().message().find("key (tensor 0, chunk 0)"), std::string::npos)
      << refused.status();
  EXPECT_NE(refused.status().message().find("workers 0 and 1"), std::string::npos)
      << refused.status();
  // Unchanged: the last good round is served.
  EXPECT_EQ(Now(), std::make_pair(int64_t{1}, 0.5f));
  auto stats = client_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->max_version(), 1);
}

TEST_F(ShardAttackTest, SilentStreamsAreEndedAndTheShardStaysUsable) {
  // 5 threads is the least a job of 2 workers may have; 8 silent streams would hold them all.
  StartJob({"--threads", "5", "--stream-idle-timeout", "1"});
  auto stub = herd::v1::ParameterServer::NewStub(Channel(shard_.port()));
  struct Silent {
    grpc::ClientContext ctx;
    herd::v1::PullChunk in;
    std::unique_ptr<grpc::ClientReaderWriter<herd::v1::PushChunk, herd::v1::PullChunk>> stream;
  };
  std::vector<std::unique_ptr<Silent>> silent;
  for (int i = 0; i < 8; ++i) {
    auto s = std::make_unique<Silent>();
    s->ctx.AddMetadata("authorization", std::string("Bearer ") + kToken);
    s->stream = stub->PushPull(&s->ctx);  // no deadline, nothing sent, never half-closed
    silent.push_back(std::move(s));
  }
  // Within a few idle timeouts the shard answers a normal client again.
  absl::StatusOr<herd::v1::ShardStats> stats;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  do {
    stats = client_->Stats();
  } while (!stats.ok() && std::chrono::steady_clock::now() < give_up);
  ASSERT_TRUE(stats.ok()) << stats.status();
  // The silent streams were ended by the shard, not left open.
  for (auto& s : silent) {
    EXPECT_FALSE(s->stream->Read(&s->in));
    const grpc::Status st = s->stream->Finish();
    EXPECT_FALSE(st.ok());
  }
  EXPECT_EQ(Now().first, 0);  // nothing they did changed the state
}

TEST_F(ShardAttackTest, SilentStreamsOfOneClientHoldFewThreadsAndNotForLong) {
  // The default --stream-idle-timeout (30 s): the first message of a stream has a deadline of
  // its own (a few seconds), and one client may hold only a few streams that sent nothing.
  StartJob({"--threads", "5"});
  auto stub = herd::v1::ParameterServer::NewStub(Channel(shard_.port()));
  struct Silent {
    grpc::ClientContext ctx;
    herd::v1::PullChunk in;
    std::unique_ptr<grpc::ClientReaderWriter<herd::v1::PushChunk, herd::v1::PullChunk>> stream;
  };
  std::vector<std::unique_ptr<Silent>> silent;
  const auto begin = std::chrono::steady_clock::now();
  for (int i = 0; i < 8; ++i) {
    auto s = std::make_unique<Silent>();
    s->ctx.AddMetadata("authorization", std::string("Bearer ") + kToken);
    s->stream = stub->PushPull(&s->ctx);
    silent.push_back(std::move(s));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // Another client is answered at once, not after the 30 s idle timeout.
  const auto asked = std::chrono::steady_clock::now();
  auto stats = client_->Stats();
  EXPECT_TRUE(stats.ok()) << stats.status();
  EXPECT_LT(std::chrono::steady_clock::now() - asked, std::chrono::seconds(2));
  // Every silent stream ends well before the idle timeout: refused at once beyond the bound,
  // the others at their first message's deadline.
  int refused = 0;
  for (auto& s : silent) {
    EXPECT_FALSE(s->stream->Read(&s->in));
    const grpc::Status st = s->stream->Finish();
    EXPECT_FALSE(st.ok());
    refused += st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED ? 1 : 0;
  }
  EXPECT_GE(refused, 4);
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(12));
  EXPECT_EQ(Now().first, 0);
}

TEST_F(ShardAttackTest, TwoAuthorizationHeadersAreRefusedByShardAndScheduler) {
  StartJob();
  auto ps = herd::v1::ParameterServer::NewStub(Channel(shard_.port()));
  auto sched = herd::v1::Scheduler::NewStub(Channel(scheduler_.port()));
  const std::string right = std::string("Bearer ") + kToken, wrong = "Bearer wrong";
  for (const auto& [a, b] : {std::pair(right, wrong), std::pair(wrong, right)}) {
    {
      grpc::ClientContext ctx;
      ctx.AddMetadata("authorization", a);
      ctx.AddMetadata("authorization", b);
      herd::v1::CheckpointRequest req;
      req.set_job("attack");
      herd::v1::CheckpointResponse resp;
      const grpc::Status st = ps->Checkpoint(&ctx, req, &resp);
      EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();
      EXPECT_NE(st.error_message().find("2 authorization headers"), std::string::npos);
    }
    {
      grpc::ClientContext ctx;
      ctx.AddMetadata("authorization", a);
      ctx.AddMetadata("authorization", b);
      herd::v1::CancelJobRequest req;
      req.set_name("attack");
      herd::v1::JobStatus resp;
      const grpc::Status st = sched->CancelJob(&ctx, req, &resp);
      EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();
    }
  }
  // Nothing ran: the job is not cancelled, the shard wrote no checkpoint beyond InitKeys.
  scheduler::ClientOptions o;
  o.address = scheduler_.address();
  o.token = kToken;
  auto client = scheduler::SchedulerClient::Connect(o);
  ASSERT_TRUE(client.ok());
  auto job = (*client)->GetJob("attack");
  ASSERT_TRUE(job.ok());
  EXPECT_NE(job->state(), herd::v1::JOB_CANCELLED);
  auto stats = client_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->durable_writes(), 1);  // the initial value only
}

}  // namespace
}  // namespace herd::server
