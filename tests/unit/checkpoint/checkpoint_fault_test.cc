// Faults at every phase of a save: every operation of writing the state files, committing and
// retiring, one at a time, as a crash (the process killed there), a crash followed by a power
// cut (what was not synced is lost), and a transient error (a full disk). After each, what a
// resume finds is the previous checkpoint or the new one, whole, and the next save works and
// leaves no temporary directory.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "checkpoint/catalog.h"
#include "checkpoint/checkpoint_id.h"
#include "checkpoint/commit.h"
#include "checkpoint/fault_env.h"
#include "checkpoint/reader.h"
#include "checkpoint/writer.h"
#include "common/temp_dir.h"
#include "tests/unit/checkpoint/checkpoint_test_util.h"

namespace herd::checkpoint {
namespace {

using ::testing::HasSubstr;
using testing::SaveCheckpoint;
using testing::ValueAt;
using testing::WorkerState;

constexpr int kWorkers = 2;

// One save of checkpoint `iteration` and its retention (keep the last one), as the committer
// runs it.
absl::Status SaveAndRetire(Env& env, const std::string& dir, int64_t iteration) {
  absl::Status s = SaveCheckpoint(env, dir, iteration, kWorkers);
  if (s.ok()) s = ApplyRetention(env, dir, /*keep_last=*/1, /*keep_every=*/0);
  return s;
}

// What a resume of `dir` finds: one of `allowed`, whole, with its own values, and no listed
// checkpoint that is not whole.
void ExpectWholeCheckpoint(const std::string& dir, std::vector<int64_t> allowed,
                           const std::string& context) {
  auto resolved = ResolveCheckpoint(PosixEnv(), dir);
  ASSERT_TRUE(resolved.ok()) << context << ": " << resolved.status();
  EXPECT_TRUE(resolved->skipped.empty()) << context << ": " << resolved->skipped[0];
  EXPECT_THAT(allowed, ::testing::Contains(resolved->manifest.iteration())) << context;
  auto reader = OpenCheckpoint(PosixEnv(), resolved->path);
  ASSERT_TRUE(reader.ok()) << context << ": " << reader.status();
  std::vector<float> a(10);
  ASSERT_TRUE((*reader)->Read("worker-1", "param/a", 10, 0, a).ok()) << context;
  EXPECT_EQ(a[9], ValueAt("param/a", 1, resolved->manifest.iteration(), 9)) << context;
  auto list = ListCheckpoints(PosixEnv(), dir);
  ASSERT_TRUE(list.ok()) << context;
  for (const auto& c : *list) {
    EXPECT_TRUE(VerifyCheckpoint(PosixEnv(), c.path).ok()) << context << ": " << c.id;
  }
}

// After the fault, the next save (by a restarted process: the real Env) commits and cleans up.
void ExpectNextSaveWorks(const std::string& dir, const std::string& context) {
  ASSERT_TRUE(SaveAndRetire(PosixEnv(), dir, 30).ok()) << context;
  ExpectWholeCheckpoint(dir, {30}, context + ", then the next save");
  auto names = PosixEnv().ListDir(dir);
  ASSERT_TRUE(names.ok()) << context;
  for (const auto& name : *names) {
    EXPECT_FALSE(name.starts_with(kTempPrefix)) << context << ": " << name << " left";
    EXPECT_FALSE(name.starts_with(kTrashPrefix)) << context << ": " << name << " left";
  }
}

// The number of operations of a whole save (with its retention) after a first checkpoint.
int64_t OperationsOfOneSave() {
  auto dir = TempDir::Create("ckpt-count");
  EXPECT_TRUE(dir.ok());
  EXPECT_TRUE(SaveCheckpoint(PosixEnv(), dir->path(), 10, kWorkers).ok());
  FaultInjectionEnv env;
  EXPECT_TRUE(SaveAndRetire(env, dir->path(), 20).ok());
  return env.operations();
}

enum class Fault { kCrash, kCrashAndPowerCut, kFullDisk };

class CheckpointFaults : public ::testing::TestWithParam<Fault> {};

TEST_P(CheckpointFaults, AtEveryOperationResumeFindsThePreviousOrTheNewCheckpointWhole) {
  const int64_t total = OperationsOfOneSave();
  ASSERT_GT(total, 20);  // writes, syncs, closes, manifest, renames, LATEST, retention
  for (int64_t k = 1; k <= total; ++k) {
    auto dir = TempDir::Create("ckpt-fault");
    ASSERT_TRUE(dir.ok());
    ASSERT_TRUE(SaveCheckpoint(PosixEnv(), dir->path(), 10, kWorkers).ok());
    FaultInjectionEnv env;
    if (GetParam() == Fault::kFullDisk) {
      env.FailAt(k, absl::ResourceExhaustedError("write: No space left on device"));
    } else {
      env.CrashAt(k);
    }
    absl::Status s = SaveAndRetire(env, dir->path(), 20);
    std::string context = "fault at operation " + std::to_string(k) + " of " +
                          std::to_string(total) + " (" + env.log()[k - 1] + ")";
    if (GetParam() == Fault::kCrashAndPowerCut) env.DropUnsyncedData();
    if (GetParam() == Fault::kFullDisk && !s.ok()) {
      // The committer gives the checkpoint up; training goes on.
      EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << context << ": " << s;
      ASSERT_TRUE(Abort(PosixEnv(), dir->path(), "it-00000020").ok());
    }
    ExpectWholeCheckpoint(dir->path(), {10, 20}, context);
    ExpectNextSaveWorks(dir->path(), context);
    if (::testing::Test::HasFailure()) return;  // one context is enough to debug
  }
}

INSTANTIATE_TEST_SUITE_P(Phases, CheckpointFaults,
                         ::testing::Values(Fault::kCrash, Fault::kCrashAndPowerCut,
                                           Fault::kFullDisk),
                         [](const auto& info) {
                           switch (info.param) {
                             case Fault::kCrash:
                               return std::string("Crash");
                             case Fault::kCrashAndPowerCut:
                               return std::string("CrashAndPowerCut");
                             case Fault::kFullDisk:
                               return std::string("FullDisk");
                           }
                           return std::string();
                         });

TEST(CheckpointFaults, ADiskWithoutRoomIsRefusedBeforeWriting) {
  auto dir = TempDir::Create("ckpt");
  ASSERT_TRUE(dir.ok());
  FaultInjectionEnv env;
  env.SetFreeBytes(100);
  auto file = WriteStateFile(env, dir->path(), "it-00000001", WorkerState(0, 1));
  EXPECT_EQ(file.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(file.status().message(), HasSubstr("100 free"));
  EXPECT_FALSE(PosixEnv().Exists(dir->path() + "/.tmp-it-00000001/worker-0.state"));
}

TEST(CheckpointFaults, AReadOnlyDirectoryIsAClearError) {
  auto dir = TempDir::Create("ckpt");
  ASSERT_TRUE(dir.ok());
  const std::string ro = dir->path() + "/ro";
  ASSERT_TRUE(PosixEnv().CreateDirs(ro).ok());
  absl::StatusOr<herd::v1::CheckpointFile> file;
  if (geteuid() != 0) {
    // A real read-only directory (root writes anyway, so root gets the errno below instead).
    std::filesystem::permissions(
        ro, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
    file = WriteStateFile(PosixEnv(), ro, "it-00000001", WorkerState(0, 1));
    std::filesystem::permissions(ro, std::filesystem::perms::owner_all);
    EXPECT_EQ(file.status().code(), absl::StatusCode::kPermissionDenied) << file.status();
  } else {
    FaultInjectionEnv env;
    env.FailAt(1, ErrnoToStatus(EROFS, "mkdir", ro + "/.tmp-it-00000001"));
    file = WriteStateFile(env, ro, "it-00000001", WorkerState(0, 1));
    EXPECT_EQ(file.status().code(), absl::StatusCode::kFailedPrecondition) << file.status();
    EXPECT_THAT(file.status().message(), HasSubstr("Read-only file system"));
  }
  EXPECT_THAT(file.status().message(), HasSubstr(ro));
}

TEST(CheckpointRetention, KeepsTheLastAndEveryNth) {
  auto dir = TempDir::Create("ckpt");
  ASSERT_TRUE(dir.ok());
  for (int64_t it = 1; it <= 7; ++it) {
    ASSERT_TRUE(SaveCheckpoint(PosixEnv(), dir->path(), it, 1).ok());
    ASSERT_TRUE(ApplyRetention(PosixEnv(), dir->path(), 2, 3).ok());
  }
  auto list = ListCheckpoints(PosixEnv(), dir->path());
  ASSERT_TRUE(list.ok());
  std::vector<int64_t> kept;
  for (const auto& c : *list) kept.push_back(c.iteration);
  EXPECT_THAT(kept, ::testing::ElementsAre(3, 6, 7));
  // keep_last <= 0 keeps them all.
  ASSERT_TRUE(ApplyRetention(PosixEnv(), dir->path(), 0, 0).ok());
  EXPECT_EQ(ListCheckpoints(PosixEnv(), dir->path())->size(), 3u);
}

TEST(CheckpointRetention, NeverDeletesTheNewestWholeCheckpoint) {
  auto dir = TempDir::Create("ckpt");
  ASSERT_TRUE(dir.ok());
  for (int64_t it : {1, 2, 3}) ASSERT_TRUE(SaveCheckpoint(PosixEnv(), dir->path(), it, 1).ok());
  // The newest lost a file: it-2 is the newest whole one and stays, whatever the policy.
  std::filesystem::remove(dir->path() + "/it-00000003/worker-0.state");
  // A save in flight (not committed) is no reason to delete anything either.
  ASSERT_TRUE(WriteStateFile(PosixEnv(), dir->path(), "it-00000004", WorkerState(0, 4)).ok());
  ASSERT_TRUE(ApplyRetention(PosixEnv(), dir->path(), 1, 0).ok());
  auto list = ListCheckpoints(PosixEnv(), dir->path());
  ASSERT_TRUE(list.ok());
  std::vector<std::string> kept;
  for (const auto& c : *list) kept.push_back(c.id);
  EXPECT_THAT(kept, ::testing::ElementsAre("it-00000002", "it-00000003"));
  auto resolved = ResolveCheckpoint(PosixEnv(), dir->path());
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->id, "it-00000002");
}

}  // namespace
}  // namespace herd::checkpoint
