// SchedulerCore::StoreGetMany: several bootstrap-store keys in one call, its wait, its partial
// answer, and the bounds it checks (scheduler/limits.h) before anything happens.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "scheduler/limits.h"
#include "scheduler/scheduler_core.h"
#include "tests/unit/scheduler/test_jobs.h"

namespace herd::scheduler {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using testing::ExampleSpec;
using ::testing::HasSubstr;
using testing::TempDir;

std::unique_ptr<SchedulerCore> OpenCore(const std::string& dir) {
  auto core = SchedulerCore::Open({dir, 10s});
  EXPECT_TRUE(core.ok()) << core.status();
  return std::move(core).value();
}

herd::v1::StoreGetManyRequest Req(const std::string& job, std::vector<std::string> keys,
                                  bool partial = false) {
  herd::v1::StoreGetManyRequest req;
  req.set_job(job);
  for (auto& k : keys) req.add_keys(std::move(k));
  req.set_partial(partial);
  return req;
}

std::vector<std::string> Values(const herd::v1::StoreGetManyResponse& resp) {
  return {resp.values().begin(), resp.values().end()};
}

TEST(StoreGetMany, AnswersEveryKeyInOrderOnceAllAreSet) {
  TempDir dir;
  auto core = OpenCore(dir.path());
  ASSERT_TRUE(core->SubmitJob(ExampleSpec("j1", 2, 0)).ok());
  ASSERT_TRUE(core->StoreSet("j1", "ucx/0", std::string("a\0b", 3)).ok());
  std::thread later([&] {
    std::this_thread::sleep_for(100ms);
    EXPECT_TRUE(core->StoreSet("j1", "ucx/2", "two").ok());
    std::this_thread::sleep_for(50ms);
    EXPECT_TRUE(core->StoreSet("j1", "ucx/1", "one").ok());
  });
  auto got =
      core->StoreGetMany(Req("j1", {"ucx/2", "ucx/0", "ucx/1", "ucx/2"}), Deadline::After(5s));
  later.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(Values(*got), ElementsAre("two", std::string("a\0b", 3), "one", "two"));
  EXPECT_EQ(got->missing_size(), 0);
}

TEST(StoreGetMany, TheDeadlineNamesTheMissingKeysOrAPartialAnswerListsThem) {
  TempDir dir;
  auto core = OpenCore(dir.path());
  ASSERT_TRUE(core->SubmitJob(ExampleSpec("j1", 2, 0)).ok());
  ASSERT_TRUE(core->StoreSet("j1", "a", "1").ok());
  ASSERT_TRUE(core->StoreSet("j1", "c", "3").ok());
  auto start = Clock::now();
  auto late = core->StoreGetMany(Req("j1", {"a", "b", "c", "d"}), Deadline::After(100ms));
  EXPECT_LT(Clock::now() - start, 3s);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded) << late.status();
  EXPECT_THAT(std::string(late.status().message()),
              HasSubstr("store keys 'b', 'd' (2 of 4) of job 'j1' were not set"));
  auto partial = core->StoreGetMany(Req("j1", {"a", "b", "c", "d"}, true), Deadline::After(50ms));
  ASSERT_TRUE(partial.ok()) << partial.status();
  EXPECT_THAT(Values(*partial), ElementsAre("1", "", "3", ""));
  EXPECT_THAT(partial->missing(), ElementsAre(1u, 3u));
  // Many missing: eight named, the rest counted.
  std::vector<std::string> keys;
  for (int i = 0; i < 30; ++i) keys.push_back("k" + std::to_string(i));
  auto lots = core->StoreGetMany(Req("j1", keys), Deadline::After(10ms));
  EXPECT_THAT(std::string(lots.status().message()), HasSubstr("'k7' and 22 more (30 of 30)"));
}

TEST(StoreGetMany, RefusesBadRequestsAndChangesNothing) {
  TempDir dir;
  auto core = OpenCore(dir.path());
  ASSERT_TRUE(core->SubmitJob(ExampleSpec("j1", 2, 0)).ok());
  ASSERT_TRUE(core->StoreSet("j1", "k", "v").ok());
  std::string before;
  for (const auto& j : core->ListJobs()) before += j.SerializeAsString();
  auto expect = [&](const herd::v1::StoreGetManyRequest& req, absl::StatusCode code,
                    const std::string& needle) {
    auto start = Clock::now();
    auto got = core->StoreGetMany(req, Deadline::After(5s));
    EXPECT_LT(Clock::now() - start, 1s) << "a refusal does not wait: " << needle;
    EXPECT_EQ(got.status().code(), code) << got.status();
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(needle));
  };
  expect(Req("j1", {}), absl::StatusCode::kInvalidArgument, "names no key");
  std::vector<std::string> too_many(limits::kMaxStoreGetManyKeys + 1, "k");
  expect(Req("j1", too_many), absl::StatusCode::kInvalidArgument, "more than the limit of 4096");
  expect(Req("j1", {"k", ""}), absl::StatusCode::kInvalidArgument, "store key 1 of the request");
  expect(Req("j1", {"k", std::string(limits::kMaxKeyBytes + 1, 'x')}),
         absl::StatusCode::kInvalidArgument, "store key 1 of the request");
  expect(Req("j1", {std::string("k\x01", 2)}), absl::StatusCode::kInvalidArgument,
         "store key 0 of the request");
  expect(Req("nope", {"k"}), absl::StatusCode::kNotFound, "job 'nope' does not exist");
  // An answer larger than one message: refused at once, partial or not.
  const std::string mib(limits::kMaxStoreValueBytes, 'v');
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(core->StoreSet("j1", "big" + std::to_string(i), mib).ok());
  for (const std::string& before_key : {std::string("big0"), std::string("absent")}) {
    expect(Req("j1", {"big0", "big1", "big2", "big3", before_key}),
           absl::StatusCode::kResourceExhausted, "the most one answer carries");
  }
  expect(Req("j1", {"big0", "missing", "big1", "big2", "big3"}, true),
         absl::StatusCode::kResourceExhausted, "ask for fewer keys");
  // Nothing changed: the job, and its store (a read-only call never spends its quota).
  ASSERT_TRUE(core->StoreSet("j1", "after", "x").ok());
  auto still = core->StoreGetMany(Req("j1", {"k", "after", "big3"}), Deadline::After(1s));
  ASSERT_TRUE(still.ok()) << still.status();
  EXPECT_EQ(still->values(0), "v");
  std::string after;
  for (const auto& j : core->ListJobs()) after += j.SerializeAsString();
  EXPECT_EQ(after, before);
}

TEST(StoreGetMany, AWaitEndsWhenTheJobEndsOrTheSchedulerStops) {
  TempDir dir;
  auto core = OpenCore(dir.path());
  ASSERT_TRUE(core->SubmitJob(ExampleSpec("j1", 2, 0)).ok());
  ASSERT_TRUE(core->SubmitJob(ExampleSpec("j2", 2, 0)).ok());
  absl::Status ended, stopped;
  std::thread a(
      [&] { ended = core->StoreGetMany(Req("j1", {"never"}), Deadline::After(20s)).status(); });
  std::this_thread::sleep_for(100ms);
  auto start = Clock::now();
  ASSERT_TRUE(core->CancelJob("j1", "test").ok());
  a.join();
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_EQ(ended.code(), absl::StatusCode::kFailedPrecondition) << ended;
  EXPECT_THAT(std::string(ended.message()), HasSubstr("has ended"));
  std::thread b(
      [&] { stopped = core->StoreGetMany(Req("j2", {"never"}), Deadline::After(20s)).status(); });
  std::this_thread::sleep_for(100ms);
  start = Clock::now();
  core->Shutdown();
  b.join();
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_EQ(stopped.code(), absl::StatusCode::kUnavailable) << stopped;
}

}  // namespace
}  // namespace herd::scheduler
