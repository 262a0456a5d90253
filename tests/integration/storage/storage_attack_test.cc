// Disk faults against the real processes: a `herd server` shard (every-round) and the `herd
// scheduler` on a disk that fills up (a small tmpfs of their own: real ENOSPC from the kernel)
// refuse writes with UNAVAILABLE naming the cause, keep serving what they acknowledged, do not
// abort, and take writes again once space is freed; a write-ahead log with flipped bytes
// makes both refuse to start with DATA_LOSS naming the log, until --accept-data-loss; so does a
// shard whose log was cut exactly at a record boundary (it replays "cleanly") or whose state
// directory is gone, caught against the version the scheduler knows was on disk; state
// directories are 0700 and their files 0600.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "herd/v1/job.pb.h"
#include "scheduler/client/scheduler_client.h"
#include "server/client/ps_client.h"
#include "tests/integration/scheduler/scheduler_process.h"
#include "tests/integration/storage/small_disk.h"
#include "tests/integration/storage/wal_surgery.h"

namespace herd {
namespace {

namespace fs = std::filesystem;
using scheduler::testing::HerdProcess;
using scheduler::testing::SchedulerProcess;
using testing::BatchEnds;
using testing::NewestLog;
using testing::SmallDiskProcess;

constexpr int kValues = 4096;  // one key of 16 KiB: every round writes more than a page

herd::v1::JobSpec PsJob(const std::string& name) {
  herd::v1::JobSpec spec;
  spec.set_name(name);
  spec.mutable_mode()->set_mode("ps_sync");
  spec.set_workers(1);
  spec.set_servers(1);
  spec.mutable_optimizer()->set_name("sgd");
  spec.mutable_optimizer()->set_learning_rate(0.5);
  auto* t = spec.add_tensors();
  t->set_name("w");
  t->add_shape(kValues);
  t->set_dtype("fp32");
  return spec;
}

std::string Floats(float v) {
  std::vector<float> f(kValues, v);
  return std::string(reinterpret_cast<const char*>(f.data()), f.size() * sizeof(float));
}

// Pushes gradient 1 for round `round` of the job's only key; with one worker the round
// completes (and under every-round is written) before the push is acknowledged.
absl::Status PushRound(server::PsClient& c, const std::string& job, int64_t round) {
  herd::v1::PushChunk p;
  p.set_job(job);
  p.set_round(round);
  p.set_data(Floats(1.0f));
  p.set_dtype("fp32");
  return c.Push({p}).status();
}

// The key's version and its first value.
std::pair<int64_t, float> PullNow(server::PsClient& c, const std::string& job) {
  herd::v1::PullRequest req;
  req.set_job(job);
  auto got = c.Pull(req);
  EXPECT_TRUE(got.ok()) << got.status();
  if (!got.ok() || got->empty()) return {-1, 0};
  float first = 0;
  std::memcpy(&first, (*got)[0].data().data(), sizeof first);
  return {(*got)[0].version(), first};
}

class StorageAttackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("herd_storage_attack_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (HasFailure()) {
      std::cerr << "scheduler log:\n" << scheduler_.log() << "\n";
      for (const auto& e : fs::directory_iterator(dir_)) {
        if (e.path().extension() == ".log") {
          std::cerr << e.path() << ":\n" << scheduler::testing::ReadFile(e.path()) << "\n";
        }
      }
    }
    scheduler_.Stop(SIGKILL);
    fs::remove_all(dir_);
  }

  std::unique_ptr<scheduler::SchedulerClient> Scheduler(const std::string& address) {
    scheduler::ClientOptions o;
    o.address = address;
    auto c = scheduler::SchedulerClient::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }
  std::unique_ptr<server::PsClient> Shard(int port) {
    server::PsClientOptions o;
    o.address = "127.0.0.1:" + std::to_string(port);
    o.call_timeout = std::chrono::seconds(10);
    auto c = server::PsClient::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }
  std::vector<std::string> ShardArgs(const std::string& job, const std::string& state) {
    return {"--scheduler", scheduler_.address(), "--job",        job,          "--state", state,
            "--listen",    "127.0.0.1:0",        "--durability", "every-round"};
  }
  absl::Status InitKey(server::PsClient& c, const std::string& job) {
    herd::v1::InitKeyChunk k;
    k.set_job(job);
    k.set_values(Floats(1.0f));
    k.set_dtype("fp32");
    return c.InitKeys({k}).status();
  }
  // Every entry of `dir` (recursively) is owner-only.
  void ExpectOwnerOnly(const fs::path& dir) {
    EXPECT_EQ(fs::status(dir).permissions() & fs::perms::all, fs::perms::owner_all) << dir;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      EXPECT_EQ(e.status().permissions() & (fs::perms::group_all | fs::perms::others_all),
                fs::perms::none)
          << e.path();
    }
  }
  // Flips bytes in the newest write-ahead log of `dir`; its name.
  std::string DamageLog(const fs::path& dir) {
    std::string name = testing::DamageLog(dir);
    EXPECT_FALSE(name.empty()) << "no write-ahead log in " << dir;
    return name;
  }

  fs::path dir_;
  SchedulerProcess scheduler_;
};

TEST_F(StorageAttackTest, ShardOnAFullDiskRefusesPushesKeepsServingAndRecovers) {
  if (!SmallDiskProcess::Supported()) GTEST_SKIP() << "unshare -rm with tmpfs is not allowed here";
  scheduler_.Start((dir_ / "scheduler").string(), 0);
  auto sched = Scheduler(scheduler_.address());
  ASSERT_TRUE(sched->SubmitJob(PsJob("full")).ok());
  const fs::path state = dir_ / "shard";
  fs::create_directories(state);
  SmallDiskProcess shard;
  auto args = ShardArgs("full", state.string());
  args.insert(args.begin(), "server");
  shard.Start(state.string(), 16, args, (dir_ / "shard.port").string(),
              (dir_ / "shard.log").string());
  auto c = Shard(shard.port());
  ASSERT_TRUE(InitKey(*c, "full").ok());
  ASSERT_TRUE(PushRound(*c, "full", 0).ok());
  ASSERT_TRUE(PushRound(*c, "full", 1).ok());
  ASSERT_EQ(PullNow(*c, "full"), std::make_pair(int64_t{2}, 0.0f));  // 1 - 0.5 - 0.5

  ASSERT_GT(shard.Fill(), 0);
  const absl::Status refused = PushRound(*c, "full", 2);
  EXPECT_TRUE(absl::IsUnavailable(refused)) << refused;
  EXPECT_NE(refused.message().find("No space left on device"), std::string::npos) << refused;
  // Refused again (not retried into a crash), the last written round still served, alive.
  EXPECT_TRUE(absl::IsUnavailable(PushRound(*c, "full", 2)));
  EXPECT_EQ(PullNow(*c, "full"), std::make_pair(int64_t{2}, 0.0f));
  EXPECT_TRUE(shard.Alive()) << shard.log();

  shard.Free();
  absl::Status again;
  for (int i = 0; i < 50; ++i) {  // the shard retries the disk at most once a second
    again = PushRound(*c, "full", 2);
    if (again.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(again.ok()) << again;
  EXPECT_EQ(PullNow(*c, "full"), std::make_pair(int64_t{3}, -0.5f));
  EXPECT_TRUE(shard.Alive());
  EXPECT_NE(shard.log().find("writes work again"), std::string::npos) << shard.log();
}

TEST_F(StorageAttackTest, SchedulerOnAFullDiskRefusesChangesKeepsItsJobsAndRecovers) {
  if (!SmallDiskProcess::Supported()) GTEST_SKIP() << "unshare -rm with tmpfs is not allowed here";
  const fs::path state = dir_ / "scheduler-state";
  fs::create_directories(state);
  SmallDiskProcess sched_process;
  sched_process.Start(state.string(), 16,
                      {"scheduler", "--listen", "127.0.0.1:0", "--state", state.string()},
                      (dir_ / "sched.port").string(), (dir_ / "sched.log").string());
  auto sched = Scheduler(sched_process.address());
  ASSERT_TRUE(sched->SubmitJob(PsJob("before")).ok());

  ASSERT_GT(sched_process.Fill(), 0);
  auto spec = PsJob("during");
  for (int i = 0; i < 200; ++i) {  // a spec larger than what is left on the disk
    auto* t = spec.add_tensors();
    t->set_name("pad" + std::to_string(i) + std::string(100, 'x'));
    t->add_shape(1);
    t->set_dtype("fp32");
  }
  auto refused = sched->SubmitJob(spec);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::IsUnavailable(refused.status())) << refused.status();
  EXPECT_NE(refused.status().message().find("No space left on device"), std::string::npos)
      << refused.status();
  // Nothing changed: the refused job does not exist, the other one is served; still alive.
  EXPECT_TRUE(absl::IsNotFound(sched->GetJob("during").status()));
  auto before = sched->GetJob("before");
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(before->state(), herd::v1::JOB_PENDING);
  EXPECT_TRUE(sched_process.Alive()) << sched_process.log();

  sched_process.Free();
  absl::Status again;
  for (int i = 0; i < 50; ++i) {
    again = sched->SubmitJob(spec).status();
    if (again.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(again.ok()) << again;
  EXPECT_TRUE(sched->GetJob("during").ok());
  EXPECT_TRUE(sched_process.Alive());
}

TEST_F(StorageAttackTest, ShardWithADamagedLogRefusesToStartUntilTheLossIsAccepted) {
  // A short heartbeat timeout: the restarted shard retakes its slot once the killed one is dead.
  scheduler_.Start((dir_ / "scheduler").string(), 0, {"--heartbeat-timeout", "500ms"});
  auto sched = Scheduler(scheduler_.address());
  ASSERT_TRUE(sched->SubmitJob(PsJob("wal")).ok());
  const fs::path state = dir_ / "shard";
  {
    HerdProcess shard;
    shard.Start("server", ShardArgs("wal", state.string()), (dir_ / "shard.port").string(),
                (dir_ / "shard.log").string(), std::chrono::seconds(20));
    auto c = Shard(shard.port());
    ASSERT_TRUE(InitKey(*c, "wal").ok());
    for (int r = 0; r < 4; ++r) ASSERT_TRUE(PushRound(*c, "wal", r).ok());
    shard.Stop(SIGKILL);  // everything acknowledged is in the write-ahead log only
  }
  ExpectOwnerOnly(state);
  const std::string log = DamageLog(state);
  ASSERT_FALSE(log.empty());
  const auto before = fs::file_size(state / log);

  auto args = ShardArgs("wal", state.string());
  const std::string out = (dir_ / "refused.log").string();
  const pid_t pid = scheduler::testing::SpawnHerd(
      [&] {
        std::vector<std::string> a = {"server"};
        a.insert(a.end(), args.begin(), args.end());
        return a;
      }(),
      out);
  const int status = scheduler::testing::WaitExit(pid, 30);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 1);
  const std::string said = scheduler::testing::ReadFile(out);
  EXPECT_NE(said.find("is damaged and would recover to an older state"), std::string::npos) << said;
  EXPECT_NE(said.find(log), std::string::npos) << said;
  EXPECT_NE(said.find("--accept-data-loss"), std::string::npos) << said;
  EXPECT_EQ(fs::file_size(state / log), before);  // the refused start changed nothing

  // The operator accepts the loss: the shard starts from the last consistent round.
  HerdProcess shard;
  args.push_back("--accept-data-loss");
  shard.Start("server", args, (dir_ / "shard2.port").string(), (dir_ / "shard2.log").string(),
              std::chrono::seconds(20));
  auto c = Shard(shard.port());
  const auto [version, value] = PullNow(*c, "wal");
  EXPECT_GE(version, 0);
  EXPECT_LT(version, 4);
  EXPECT_EQ(value, 1.0f - 0.5f * static_cast<float>(version));
}

// The shard's state as of round `round` of key "w" (one worker pushing gradient 1 from 1.0).
std::pair<int64_t, float> AtRound(int64_t round) {
  return {round, 1.0f - 0.5f * static_cast<float>(round)};
}

TEST_F(StorageAttackTest, ShardWhoseLogWasCutAtARecordBoundaryRefusesToGoBackInTime) {
  scheduler_.Start((dir_ / "scheduler").string(), 0, {"--heartbeat-timeout", "500ms"});
  auto sched = Scheduler(scheduler_.address());
  ASSERT_TRUE(sched->SubmitJob(PsJob("cut")).ok());
  const fs::path state = dir_ / "shard";
  {
    HerdProcess shard;
    shard.Start("server", ShardArgs("cut", state.string()), (dir_ / "shard.port").string(),
                (dir_ / "shard.log").string(), std::chrono::seconds(20));
    auto c = Shard(shard.port());
    ASSERT_TRUE(InitKey(*c, "cut").ok());
    for (int r = 0; r < 6; ++r) ASSERT_TRUE(PushRound(*c, "cut", r).ok());
    // The shard's heartbeats tell the scheduler that version 6 is on disk.
    int64_t reported = -1;
    for (int i = 0; i < 100 && reported != 6; ++i) {
      auto job = sched->GetJob("cut");
      ASSERT_TRUE(job.ok()) << job.status();
      if (job->servers(0).has_durable_version()) reported = job->servers(0).durable_version();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_EQ(reported, 6);
    shard.Stop(SIGKILL);
  }
  // Cut the log right after the batch of round 1: what is left is a whole, shorter log.
  const fs::path log = NewestLog(state);
  ASSERT_FALSE(log.empty());
  const std::vector<uint64_t> ends = BatchEnds(log);
  ASSERT_GE(ends.size(), 7u) << "the initial value and six rounds";
  const uint64_t cut = ends[ends.size() - 5];  // drops rounds 2..5
  fs::resize_file(log, cut);

  auto args = ShardArgs("cut", state.string());
  const std::string out = (dir_ / "refused.log").string();
  std::vector<std::string> refused_args = {"server"};
  refused_args.insert(refused_args.end(), args.begin(), args.end());
  const int status =
      scheduler::testing::WaitExit(scheduler::testing::SpawnHerd(refused_args, out), 30);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 1);
  const std::string said = scheduler::testing::ReadFile(out);
  EXPECT_NE(said.find("went back in time"), std::string::npos) << said;
  EXPECT_NE(said.find("recovered version 2"), std::string::npos) << said;
  EXPECT_NE(said.find("had written version 6"), std::string::npos) << said;
  EXPECT_NE(said.find(log.filename().string()), std::string::npos) << said;
  EXPECT_NE(said.find("--accept-data-loss"), std::string::npos) << said;
  // The refused start served nothing and changed nothing the scheduler knows.
  auto job = sched->GetJob("cut");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->servers(0).durable_version(), 6);

  // The operator accepts the loss: the shard serves round 2 and reports it.
  HerdProcess shard;
  args.push_back("--accept-data-loss");
  shard.Start("server", args, (dir_ / "shard2.port").string(), (dir_ / "shard2.log").string(),
              std::chrono::seconds(20));
  auto c = Shard(shard.port());
  EXPECT_EQ(PullNow(*c, "cut"), AtRound(2));
  EXPECT_NE(shard.log().find("went back in time"), std::string::npos) << shard.log();
  int64_t reported = -1;
  for (int i = 0; i < 100 && reported != 2; ++i) {
    job = sched->GetJob("cut");
    ASSERT_TRUE(job.ok()) << job.status();
    reported = job->servers(0).durable_version();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(reported, 2);
}

TEST_F(StorageAttackTest, ShardRestartedOnAnEmptyStateDirectoryRefusesToServe) {
  scheduler_.Start((dir_ / "scheduler").string(), 0, {"--heartbeat-timeout", "500ms"});
  auto sched = Scheduler(scheduler_.address());
  ASSERT_TRUE(sched->SubmitJob(PsJob("lost")).ok());
  auto args = ShardArgs("lost", (dir_ / "shard").string());
  args.insert(args.end(), {"--name", "shard-a"});
  {
    HerdProcess shard;
    shard.Start("server", args, (dir_ / "shard.port").string(), (dir_ / "shard.log").string(),
                std::chrono::seconds(20));
    auto c = Shard(shard.port());
    ASSERT_TRUE(InitKey(*c, "lost").ok());
    ASSERT_TRUE(PushRound(*c, "lost", 0).ok());
    int64_t reported = -1;
    for (int i = 0; i < 100 && reported != 1; ++i) {
      auto job = sched->GetJob("lost");
      ASSERT_TRUE(job.ok()) << job.status();
      reported = job->servers(0).durable_version();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_EQ(reported, 1);
    shard.Stop(SIGKILL);
  }
  // The shard comes back on another machine's empty disk (same name, new directory).
  args = ShardArgs("lost", (dir_ / "elsewhere").string());
  args.insert(args.end(), {"--name", "shard-a"});
  std::vector<std::string> refused_args = {"server"};
  refused_args.insert(refused_args.end(), args.begin(), args.end());
  const std::string out = (dir_ / "refused.log").string();
  const int status =
      scheduler::testing::WaitExit(scheduler::testing::SpawnHerd(refused_args, out), 30);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 1);
  const std::string said = scheduler::testing::ReadFile(out);
  EXPECT_NE(said.find("went back in time"), std::string::npos) << said;
  EXPECT_NE(said.find("has no record at all"), std::string::npos) << said;
  EXPECT_NE(said.find((dir_ / "elsewhere").string()), std::string::npos) << said;
}

TEST_F(StorageAttackTest, SchedulerWithADamagedLogRefusesToStartUntilTheLossIsAccepted) {
  const fs::path state = dir_ / "scheduler";
  scheduler_.Start(state.string(), 0);
  {
    auto sched = Scheduler(scheduler_.address());
    for (int i = 0; i < 8; ++i) ASSERT_TRUE(sched->SubmitJob(PsJob("j" + std::to_string(i))).ok());
  }
  scheduler_.Stop(SIGKILL);
  ExpectOwnerOnly(state);
  const std::string log = DamageLog(state);
  ASSERT_FALSE(log.empty());

  const std::string out = (dir_ / "refused.log").string();
  const int status = scheduler::testing::WaitExit(
      scheduler::testing::SpawnHerd(
          {"scheduler", "--state", state.string(), "--listen", "127.0.0.1:0"}, out),
      30);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 1);
  const std::string said = scheduler::testing::ReadFile(out);
  EXPECT_NE(said.find("is damaged and would recover to an older state"), std::string::npos) << said;
  EXPECT_NE(said.find(log), std::string::npos) << said;

  scheduler_.Start(state.string(), 0, {"--accept-data-loss"});
  auto sched = Scheduler(scheduler_.address());
  auto jobs = sched->ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_LT(jobs->jobs_size(), 8);  // the jobs after the damage are gone, as accepted
  EXPECT_NE(scheduler_.log().find("--accept-data-loss"), std::string::npos);
}

}  // namespace
}  // namespace herd
