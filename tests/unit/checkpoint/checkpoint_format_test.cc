// A checkpoint written, committed and read back on the real disk: the values, the records, the
// layout check, the catalog and the ids.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>

#include "checkpoint/catalog.h"
#include "checkpoint/checkpoint_id.h"
#include "checkpoint/commit.h"
#include "checkpoint/reader.h"
#include "checkpoint/state_source.h"
#include "checkpoint/writer.h"
#include "common/temp_dir.h"
#include "tests/unit/checkpoint/checkpoint_test_util.h"

namespace herd::checkpoint {
namespace {

using ::testing::ElementsAre;
using testing::FilesUnder;
using ::testing::HasSubstr;
using testing::Layout;
using testing::SaveCheckpoint;
using testing::ValueAt;
using testing::WorkerState;

TEST(CheckpointId, SortsByIterationAndParsesBack) {
  EXPECT_EQ(CheckpointId(120), "it-00000120");
  EXPECT_EQ(CheckpointId(123456789), "it-123456789");
  EXPECT_EQ(ParseCheckpointId("it-00000120"), 120);
  EXPECT_EQ(ParseCheckpointId("it-123456789"), 123456789);
  EXPECT_FALSE(ParseCheckpointId("it-").has_value());
  EXPECT_FALSE(ParseCheckpointId("it-12x").has_value());
  EXPECT_FALSE(ParseCheckpointId(".tmp-it-00000120").has_value());
  EXPECT_FALSE(ParseCheckpointId("LATEST").has_value());
  EXPECT_LT(CheckpointId(99), CheckpointId(100));
}

TEST(CheckpointFormat, RoundTripsEveryValueThroughTheReader) {
  auto dir = TempDir::Create("ckpt");
  ASSERT_TRUE(dir.ok());
  ASSERT_TRUE(SaveCheckpoint(PosixEnv(), dir->path(), 40, 2).ok());

  auto reader = OpenCheckpoint(PosixEnv(), dir->path() + "/it-00000040");
  ASSERT_TRUE(reader.ok()) << reader.status();
  const StateSource& source = **reader;
  EXPECT_EQ(source.workers(), 2);
  EXPECT_EQ((*reader)->manifest().iteration(), 40);
  EXPECT_EQ((*reader)->manifest().format_version(), kFormatVersion);
  EXPECT_THAT((*reader)->processes(), ElementsAre("worker-0", "worker-1"));
  EXPECT_TRUE(source.Has("worker-1", "param/b"));
  EXPECT_FALSE(source.Has("worker-2", "param/b"));
  EXPECT_FALSE(source.Has("worker-1", "adam_m/b"));

  // param/b spans two extents: a read across both, and one inside the second.
  std::vector<float> b(7);
  ASSERT_TRUE(source.Read("worker-1", "param/b", 7, 0, b).ok());
  for (int i = 0; i < 7; ++i) EXPECT_EQ(b[i], ValueAt("param/b", 1, 40, i)) << i;
  std::vector<float> part(2);
  ASSERT_TRUE(source.Read("worker-0", "param/b", 7, 4, part).ok());
  EXPECT_EQ(part[0], ValueAt("param/b", 0, 40, 4));
  EXPECT_EQ(part[1], ValueAt("param/b", 0, 40, 5));
  EXPECT_EQ(source.Value("worker-0", "iteration"), "40");
  EXPECT_EQ(source.Value("worker-0", "nothing"), std::nullopt);

  // The StateSource rules work over the reader as over memory.
  std::vector<float> mean(10);
  ASSERT_TRUE(ReadOwnOrMean(source, "momentum/a", 10, 0, 0, 3, mean).ok());
  for (int i = 0; i < 10; ++i) {
    EXPECT_FLOAT_EQ(mean[i],
                    (ValueAt("momentum/a", 0, 40, i) + ValueAt("momentum/a", 1, 40, i)) / 2);
  }

  // Errors of the StateSource contract.
  EXPECT_EQ(source.Read("worker-0", "param/a", 11, 0, b).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(source.Read("worker-0", "nothing", 7, 0, b).code(), absl::StatusCode::kNotFound);
  std::vector<float> past(3);
  EXPECT_EQ(source.Read("worker-0", "param/a", 10, 8, past).code(), absl::StatusCode::kOutOfRange);

  // ReadProcess gives back exactly what was staged.
  auto state = (*reader)->ReadProcess("worker-1");
  ASSERT_TRUE(state.ok()) << state.status();
  const ProcessState want = WorkerState(1, 40);
  ASSERT_EQ(state->extents.size(), want.extents.size());
  for (size_t i = 0; i < want.extents.size(); ++i) {
    EXPECT_EQ(state->extents[i].name, want.extents[i].name);
    EXPECT_EQ(state->extents[i].offset, want.extents[i].offset);
    EXPECT_EQ(state->extents[i].total, want.extents[i].total);
    EXPECT_EQ(state->extents[i].bytes, want.extents[i].bytes);
  }
  EXPECT_EQ(state->values, want.values);
  EXPECT_EQ((*reader)->ReadProcess("shard-0").status().code(), absl::StatusCode::kNotFound);
}

TEST(CheckpointFormat, LayoutCheckNamesTheFirstTensorThatDiffers) {
  auto dir = TempDir::Create("ckpt");
  ASSERT_TRUE(dir.ok());
  ASSERT_TRUE(SaveCheckpoint(PosixEnv(), dir->path(), 5, 1).ok());
  auto reader = OpenCheckpoint(PosixEnv(), dir->path());
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_TRUE((*reader)->CheckLayout(Layout()).ok());

  auto layout = Layout();
  layout[1].set_count(8);
  layout[1].set_shape(0, 8);
  absl::Status s = (*reader)->CheckLayout(layout);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("'b' of 7 elements"));
  EXPECT_THAT(s.message(), HasSubstr("'b' of 8 elements"));

  layout = Layout();
  layout[0].set_shape(0, 5);
  layout[0].set_shape(1, 2);
  s = (*reader)->CheckLayout(layout);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("[2, 5]"));

  layout = Layout();
  layout.push_back(layout[0]);
  layout.back().set_name("c");
  s = (*reader)->CheckLayout(layout);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("'c'"));

  layout = Layout();
  layout.pop_back();
  s = (*reader)->CheckLayout(layout);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("'b'"));
}

TEST(CheckpointCatalog, ListsOldestFirstAndMarksLatest) {
  auto dir = TempDir::Create("ckpt");
  ASSERT_TRUE(dir.ok());
  for (int64_t it : {100, 20, 3}) ASSERT_TRUE(SaveCheckpoint(PosixEnv(), dir->path(), it, 2).ok());
  auto list = ListCheckpoints(PosixEnv(), dir->path());
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].id, "it-00000003");
  EXPECT_EQ((*list)[2].id, "it-00000100");
  for (const auto& c : *list) {
    EXPECT_TRUE(c.manifest_ok);
    EXPECT_EQ(c.problem, "");
    EXPECT_GT(c.bytes, 0);
    // Only the header is kept per listed checkpoint: the files and the layout (what grows
    // with the model) are counted, not held; the resolved checkpoint has them whole.
    EXPECT_GT(c.files, 0);
    EXPECT_EQ(c.manifest.files_size(), 0);
    EXPECT_EQ(c.manifest.layout_size(), 0);
    EXPECT_FALSE(c.manifest.job().empty());
  }
  // LATEST names the last commit (it-3 here), which the catalog reports but does not follow.
  EXPECT_TRUE((*list)[0].latest);
  auto resolved = ResolveCheckpoint(PosixEnv(), dir->path());
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->id, "it-00000100");
  EXPECT_TRUE(resolved->skipped.empty());
  EXPECT_EQ(resolved->manifest.files_size(), (*list)[2].files);
  EXPECT_GT(resolved->manifest.layout_size(), 0);
  // No temporary directory is left behind by a commit.
  auto names = PosixEnv().ListDir(dir->path());
  ASSERT_TRUE(names.ok());
  for (const auto& name : *names) {
    EXPECT_FALSE(name.starts_with(".tmp-")) << name;
  }
}

// A checkpoint holds the model and every process's state: its owner's only.
TEST(CheckpointFormat, DirectoriesAndFilesAreTheOwnersOnly) {
  auto dir = TempDir::Create("ckpt");
  ASSERT_TRUE(dir.ok());
  const std::string root = dir->path() + "/new/ckpt";
  ASSERT_TRUE(SaveCheckpoint(PosixEnv(), root, 10, 2).ok());
  namespace fs = std::filesystem;
  const auto perms = [](const fs::path& p) { return fs::status(p).permissions() & fs::perms::all; };
  EXPECT_EQ(perms(dir->path() + "/new"), fs::perms::owner_all);
  EXPECT_EQ(perms(root), fs::perms::owner_all);
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    const fs::perms want = entry.is_directory() ? fs::perms::owner_all
                                                : fs::perms::owner_read | fs::perms::owner_write;
    EXPECT_EQ(perms(entry.path()), want) << entry.path();
    files += entry.is_regular_file() ? 1 : 0;
  }
  EXPECT_GE(files, 3);  // two workers' files and the manifest, at least
}

TEST(CheckpointCommit, RefusesBadRequests) {
  auto dir = TempDir::Create("ckpt");
  ASSERT_TRUE(dir.ok());
  herd::v1::CheckpointManifest m;
  m.set_id("latest");
  EXPECT_EQ(Commit(PosixEnv(), dir->path(), m).code(), absl::StatusCode::kInvalidArgument);
  m.set_id("it-00000001");
  EXPECT_EQ(Commit(PosixEnv(), dir->path(), m).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(SaveCheckpoint(PosixEnv(), dir->path(), 1, 1).ok());
  EXPECT_EQ(SaveCheckpoint(PosixEnv(), dir->path(), 1, 1).code(), absl::StatusCode::kAlreadyExists);
  // A manifest naming a file no process wrote is not committed.
  auto file = WriteStateFile(PosixEnv(), dir->path(), "it-00000002", WorkerState(0, 2));
  ASSERT_TRUE(file.ok());
  m.set_id("it-00000002");
  *m.add_files() = *file;
  m.add_files()->set_file("worker-1.state");
  m.mutable_files(1)->set_process("worker-1");
  absl::Status s = Commit(PosixEnv(), dir->path(), m);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("worker-1.state"));
  EXPECT_FALSE(PosixEnv().Exists(dir->path() + "/it-00000002"));
  // A file outside the checkpoint's directory, or two files of one process, are refused.
  m.mutable_files(1)->set_file("../worker-1.state");
  EXPECT_EQ(Commit(PosixEnv(), dir->path(), m).code(), absl::StatusCode::kInvalidArgument);
  *m.mutable_files(1) = *file;
  s = Commit(PosixEnv(), dir->path(), m);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("two files"));
  ASSERT_TRUE(Abort(PosixEnv(), dir->path(), "it-00000002").ok());
  EXPECT_FALSE(PosixEnv().Exists(dir->path() + "/.tmp-it-00000002"));
}

TEST(CheckpointWriter, WritesInTheBackgroundAndDrains) {
  auto dir = TempDir::Create("ckpt");
  ASSERT_TRUE(dir.ok());
  CheckpointWriter writer;
  std::vector<absl::StatusOr<herd::v1::CheckpointFile>> results;
  std::mutex mu;
  for (int r = 0; r < 3; ++r) {
    writer.Stage(dir->path(), "it-00000007", WorkerState(r, 7),
                 [&](absl::StatusOr<herd::v1::CheckpointFile> f) {
                   std::lock_guard<std::mutex> lock(mu);
                   results.push_back(std::move(f));
                 });
  }
  ASSERT_TRUE(writer.Drain(Deadline::After(std::chrono::seconds(30))).ok());
  EXPECT_EQ(writer.pending_bytes(), 0);
  ASSERT_EQ(results.size(), 3u);
  herd::v1::CheckpointManifest m;
  m.set_id("it-00000007");
  m.set_workers(3);
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(results[r].ok()) << results[r].status();
    EXPECT_EQ(results[r]->process(), WorkerProcess(r));
    EXPECT_EQ(results[r]->extents_size(), 4);
    *m.add_files() = *results[r];
  }
  ASSERT_TRUE(Commit(PosixEnv(), dir->path(), m).ok());
  EXPECT_TRUE(VerifyCheckpoint(PosixEnv(), dir->path() + "/it-00000007").ok());

  // A bad id is the stage's error, not a crash of the writer.
  absl::Status bad;
  writer.Stage(dir->path(), "../x", WorkerState(0, 1),
               [&](absl::StatusOr<herd::v1::CheckpointFile> f) { bad = f.status(); });
  ASSERT_TRUE(writer.Drain(Deadline::After(std::chrono::seconds(30))).ok());
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
}

// The real disk, with file creation held until the test releases it (a slow disk).
class HeldEnv final : public Env {
 public:
  void Release() { released_.set_value(); }
  absl::Status CreateDirs(const std::string& p) override { return PosixEnv().CreateDirs(p); }
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& p) override {
    gate_.wait();
    return PosixEnv().NewWritableFile(p);
  }
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& p) override {
    return PosixEnv().NewRandomAccessFile(p);
  }
  absl::Status Rename(const std::string& a, const std::string& b) override {
    return PosixEnv().Rename(a, b);
  }
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& p) override {
    return PosixEnv().ListDir(p);
  }
  absl::Status RemoveAll(const std::string& p) override { return PosixEnv().RemoveAll(p); }
  absl::Status SyncDir(const std::string& p) override { return PosixEnv().SyncDir(p); }
  absl::StatusOr<FileInfo> Stat(const std::string& p) override { return PosixEnv().Stat(p); }
  absl::StatusOr<uint64_t> FreeBytes(const std::string& p) override {
    return PosixEnv().FreeBytes(p);
  }

 private:
  std::promise<void> released_;
  std::shared_future<void> gate_ = released_.get_future().share();
};

TEST(CheckpointWriter, StageReturnsAtOnceAndDrainKeepsItsDeadline) {
  auto dir = TempDir::Create("ckpt");
  ASSERT_TRUE(dir.ok());
  HeldEnv env;
  CheckpointWriter writer(env);
  const ProcessState state = WorkerState(0, 3);
  int64_t bytes = 0;
  for (const Extent& e : state.extents) bytes += static_cast<int64_t>(e.bytes.size());
  std::atomic<bool> done{false};
  writer.Stage(dir->path(), "it-00000003", state,
               [&](absl::StatusOr<herd::v1::CheckpointFile> f) { done = f.ok(); });
  // The disk holds the write: Stage returned, the staging copy is held, Drain gives up in time.
  EXPECT_EQ(writer.pending_bytes(), bytes);
  const auto t0 = std::chrono::steady_clock::now();
  absl::Status s = writer.Drain(Deadline::After(std::chrono::milliseconds(200)));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("1 state file(s)"));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_FALSE(done);
  env.Release();
  ASSERT_TRUE(writer.Drain(Deadline::After(std::chrono::seconds(30))).ok());
  EXPECT_TRUE(done);
  EXPECT_EQ(writer.pending_bytes(), 0);
}

TEST(CheckpointWriter, DestructionCancelsWhatWasNotStarted) {
  auto dir = TempDir::Create("ckpt");
  ASSERT_TRUE(dir.ok());
  int done = 0, cancelled = 0;
  {
    CheckpointWriter writer;
    for (int i = 0; i < 20; ++i) {
      writer.Stage(dir->path(), CheckpointId(i), WorkerState(0, i),
                   [&](absl::StatusOr<herd::v1::CheckpointFile> f) {
                     ++done;
                     if (absl::IsCancelled(f.status())) ++cancelled;
                   });
    }
  }
  EXPECT_EQ(done, 20);  // every `done` ran exactly once, written or cancelled
}

TEST(CheckpointWriter, RefusesAnExtentThatDoesNotFit) {
  auto dir = TempDir::Create("ckpt");
  ASSERT_TRUE(dir.ok());
  ProcessState s = WorkerState(0, 1);
  s.extents[0].offset = 5;  // 10 elements at 5 of a tensor of 10
  auto file = WriteStateFile(PosixEnv(), dir->path(), "it-00000001", s);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(file.status().message(), HasSubstr("param/a"));
}

}  // namespace
}  // namespace herd::checkpoint
