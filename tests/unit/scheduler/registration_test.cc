// Registration as a group commit (scheduler/registration.cc): processes that register together
// share the state's synced writes, and each one is placed exactly as if it had come alone.
// Thousands of deaths at once keep the epoch's reason small.

#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "absl/strings/str_format.h"
#include "scheduler/scheduler_core.h"
#include "storage/fault_file_system.h"
#include "tests/unit/scheduler/test_jobs.h"

namespace herd::scheduler {
namespace {

using namespace std::chrono_literals;
using testing::ExampleSpec;
using testing::TempDir;

herd::v1::RegisterNodeRequest Worker(const std::string& job, const std::string& name) {
  herd::v1::RegisterNodeRequest r;
  r.set_job(job);
  r.set_role(herd::v1::ROLE_WORKER);
  r.set_name(name);
  r.set_address(name + ":1234");
  r.set_host("host-" + name);
  return r;
}

// `reqs` registered at once, one thread each; their answers in the same order.
std::vector<absl::StatusOr<herd::v1::RegisterNodeResponse>> RegisterTogether(
    SchedulerCore& core, const std::vector<herd::v1::RegisterNodeRequest>& reqs) {
  std::vector<absl::StatusOr<herd::v1::RegisterNodeResponse>> answers(
      reqs.size(), absl::UnknownError("not answered"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < reqs.size(); ++i) {
    threads.emplace_back([&, i] { answers[i] = core.RegisterNode(reqs[i]); });
  }
  for (auto& t : threads) t.join();
  return answers;
}

struct SlowDiskCore {
  // Every sync takes 30 ms more: registrations that arrive while one is written queue behind it.
  SlowDiskCore(const std::string& dir, std::chrono::milliseconds timeout = 10s) {
    faults->SlowSyncs(30ms);
    SchedulerOptions o;
    o.state_dir = dir;
    o.heartbeat_timeout = timeout;
    o.file_system = faults;
    auto opened = SchedulerCore::Open(o);
    EXPECT_TRUE(opened.ok()) << opened.status();
    core = std::move(opened).value();
  }
  std::shared_ptr<storage::FaultFileSystem> faults = std::make_shared<storage::FaultFileSystem>();
  std::unique_ptr<SchedulerCore> core;
};

TEST(Registration, ProcessesRegisteringTogetherShareTheStateWrites) {
  TempDir dir;
  constexpr int kWorkers = 48;
  {
    SlowDiskCore s(dir.path());
    ASSERT_TRUE(s.core->SubmitJob(ExampleSpec("j1", kWorkers, 0)).ok());
    std::vector<herd::v1::RegisterNodeRequest> reqs;
    for (int i = 0; i < kWorkers; ++i) reqs.push_back(Worker("j1", absl::StrFormat("w%d", i)));
    const int64_t syncs_before = s.faults->syncs();
    const auto answers = RegisterTogether(*s.core, reqs);
    const int64_t syncs = s.faults->syncs() - syncs_before;

    std::set<int> ranks;
    std::set<uint64_t> ids;
    for (const auto& a : answers) {
      ASSERT_TRUE(a.ok()) << a.status();
      ranks.insert(a->rank());
      ids.insert(a->node_id());
    }
    EXPECT_EQ(ranks.size(), size_t{kWorkers}) << "one rank each";
    EXPECT_EQ(*ranks.rbegin(), kWorkers - 1);
    EXPECT_EQ(ids.size(), size_t{kWorkers}) << "one node id each";
    // One after another, 48 registrations are 48 synced writes; behind a slow disk they group.
    EXPECT_LT(syncs, kWorkers / 3) << syncs << " synced writes for " << kWorkers;
    auto job = s.core->GetJob("j1");
    ASSERT_TRUE(job.ok());
    EXPECT_EQ(job->state(), herd::v1::JOB_RUNNING);
    EXPECT_EQ(job->epoch(), 1u + kWorkers) << "one epoch per registration, as one at a time";
  }
  // Every registration of every group was written: a restarted scheduler has them all.
  auto core = SchedulerCore::Open({dir.path(), 10s});
  ASSERT_TRUE(core.ok()) << core.status();
  auto job = (*core)->GetJob("j1");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), herd::v1::JOB_RUNNING);
  for (int i = 0; i < kWorkers; ++i) {
    EXPECT_TRUE(job->workers(i).alive()) << i;
    EXPECT_FALSE(job->workers(i).name().empty()) << i;
  }
}

TEST(Registration, ARefusalInAGroupLeavesTheOthersAsTheyWouldBeAlone) {
  TempDir dir;
  SlowDiskCore s(dir.path());
  ASSERT_TRUE(s.core->SubmitJob(ExampleSpec("j1", 8, 0)).ok());
  // The first registration is being written (30 ms) while the rest queue behind it: they form
  // one group, in which the same name twice, a rank out of range and a taken rank are refused.
  std::vector<herd::v1::RegisterNodeRequest> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(Worker("j1", absl::StrFormat("w%d", i)));
  reqs.push_back(Worker("j1", "w3"));  // 6: a name already alive (or the other w3 is)
  auto out_of_range = Worker("j1", "far");
  out_of_range.set_requested_rank(99);
  reqs.push_back(out_of_range);  // 7
  auto want_seven = Worker("j1", "seven");
  want_seven.set_requested_rank(7);
  reqs.push_back(want_seven);  // 8
  auto also_seven = Worker("j1", "also-seven");
  also_seven.set_requested_rank(7);
  reqs.push_back(also_seven);  // 9: one of the two asking for rank 7 is refused
  const auto answers = RegisterTogether(*s.core, reqs);

  int ok = 0, already = 0;
  for (size_t i = 0; i < answers.size(); ++i) {
    if (i == 7) {
      EXPECT_EQ(answers[i].status().code(), absl::StatusCode::kInvalidArgument)
          << answers[i].status();
      continue;
    }
    if (answers[i].ok()) {
      ++ok;
    } else {
      EXPECT_EQ(answers[i].status().code(), absl::StatusCode::kAlreadyExists)
          << answers[i].status();
      ++already;
    }
  }
  EXPECT_EQ(already, 2) << "one 'w3' and one of the two asking for rank 7";
  EXPECT_EQ(ok, 7);
  auto job = s.core->GetJob("j1");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->epoch(), 1u + 7) << "only the placed ones changed the membership";
  std::set<std::string> names;
  for (const auto& m : job->workers()) {
    if (!m.name().empty()) names.insert(m.name());
  }
  EXPECT_EQ(names.size(), 7u);
  EXPECT_TRUE(names.contains("w3"));
  EXPECT_FALSE(names.contains("far"));
  EXPECT_EQ(job->workers(7).name() == "seven" || job->workers(7).name() == "also-seven", true);
}

TEST(Registration, AFailedWriteRefusesTheWholeGroupAndChangesNothing) {
  TempDir dir;
  SlowDiskCore s(dir.path());
  ASSERT_TRUE(s.core->SubmitJob(ExampleSpec("j1", 8, 0)).ok());
  const auto before = s.core->GetJob("j1");
  ASSERT_TRUE(before.ok());
  s.faults->Fail(storage::Fault::kNoSpace);
  std::vector<herd::v1::RegisterNodeRequest> reqs;
  for (int i = 0; i < 8; ++i) reqs.push_back(Worker("j1", absl::StrFormat("w%d", i)));
  for (const auto& a : RegisterTogether(*s.core, reqs)) {
    EXPECT_EQ(a.status().code(), absl::StatusCode::kUnavailable) << a.status();
  }
  auto after = s.core->GetJob("j1");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->SerializeAsString(), before->SerializeAsString());
  // The disk is back (the state retries it at most once a second): the same processes register.
  s.faults->Fail(storage::Fault::kNone);
  std::this_thread::sleep_for(1100ms);
  for (const auto& a : RegisterTogether(*s.core, reqs)) EXPECT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(s.core->GetJob("j1")->state(), herd::v1::JOB_RUNNING);
}

TEST(Registration, ManyDeathsAtOnceNameAFewAndCountTheRest) {
  TempDir dir;
  auto opened = SchedulerCore::Open({dir.path(), 200ms});
  ASSERT_TRUE(opened.ok()) << opened.status();
  auto& core = **opened;
  constexpr int kWorkers = 40;
  ASSERT_TRUE(core.SubmitJob(ExampleSpec("j1", kWorkers, 0)).ok());
  for (int i = 0; i < kWorkers; ++i) {
    ASSERT_TRUE(core.RegisterNode(Worker("j1", absl::StrFormat("w%d", i))).ok());
  }
  ASSERT_EQ(core.GetJob("j1")->state(), herd::v1::JOB_RUNNING);
  // No heartbeat from anyone: every worker is declared dead in one sweep.
  std::this_thread::sleep_for(300ms);
  core.DetectFailures();
  auto job = core.GetJob("j1");
  ASSERT_TRUE(job.ok());
  ASSERT_EQ(job->state(), herd::v1::JOB_FAILED) << job->epoch_reason();
  const std::string& reason = job->failure_reason();
  EXPECT_NE(reason.find("and 36 more"), std::string::npos) << reason;
  EXPECT_NE(reason.find("'w0' (rank 0) declared dead"), std::string::npos) << reason;
  EXPECT_LT(reason.size(), 1024u) << reason;
  EXPECT_LT(job->epoch_reason().size(), 1200u) << job->epoch_reason();
}

}  // namespace
}  // namespace herd::scheduler
