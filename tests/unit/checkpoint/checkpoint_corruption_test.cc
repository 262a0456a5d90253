// Damaged checkpoints and paths that are not checkpoints: every damage is refused with
// DATA_LOSS naming the file (and the extent and both checksums where an extent is hit), and a
// resume of the directory falls back to the previous good checkpoint, saying why.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/str_format.h"
#include "checkpoint/catalog.h"
#include "checkpoint/checkpoint_id.h"
#include "checkpoint/reader.h"
#include "common/temp_dir.h"
#include "tests/unit/checkpoint/checkpoint_test_util.h"

namespace herd::checkpoint {
namespace {

using testing::FilesUnder;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::SaveCheckpoint;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void Spill(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

class CheckpointCorruption : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = TempDir::Create("ckpt-corrupt");
    ASSERT_TRUE(dir.ok());
    dir_.emplace(*std::move(dir));
    ASSERT_TRUE(SaveCheckpoint(PosixEnv(), dir_->path(), 10, 2).ok());
    ASSERT_TRUE(SaveCheckpoint(PosixEnv(), dir_->path(), 20, 2).ok());
    newest_ = dir_->path() + "/it-00000020";
  }

  // The newest is refused naming `file`; a resume of the directory takes it-10 and says so.
  void ExpectRefusedAndFallBack(const std::string& file, const std::string& context) {
    absl::Status s = VerifyCheckpoint(PosixEnv(), newest_);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << context << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr(std::filesystem::path(file).filename().string())) << context;
    auto resolved = ResolveCheckpoint(PosixEnv(), dir_->path());
    ASSERT_TRUE(resolved.ok()) << context << ": " << resolved.status();
    EXPECT_EQ(resolved->id, "it-00000010") << context;
    ASSERT_EQ(resolved->skipped.size(), 1u) << context;
    EXPECT_THAT(resolved->skipped[0], HasSubstr("it-00000020: ")) << context;
    // The reader of the directory is the previous checkpoint's, and says what it skipped.
    auto reader = OpenCheckpoint(PosixEnv(), dir_->path());
    ASSERT_TRUE(reader.ok()) << context << ": " << reader.status();
    EXPECT_EQ((*reader)->manifest().id(), "it-00000010") << context;
    EXPECT_EQ((*reader)->skipped().size(), 1u) << context;
    // Asked for by name, the broken one is an error, not a fallback.
    EXPECT_EQ(ResolveCheckpoint(PosixEnv(), newest_).status().code(), absl::StatusCode::kDataLoss)
        << context;
  }

  std::optional<TempDir> dir_;
  std::string newest_;
};

TEST_F(CheckpointCorruption, FiftyRandomSingleByteCorruptionsAreAllDetected) {
  const std::vector<std::string> files = FilesUnder(newest_);
  ASSERT_EQ(files.size(), 3u);  // MANIFEST, worker-0.state, worker-1.state
  std::vector<std::string> contents;
  size_t total = 0;
  for (const auto& f : files) {
    contents.push_back(Slurp(f));
    total += contents.back().size();
  }
  std::mt19937_64 rng(13);
  int in_extents = 0;
  for (int trial = 0; trial < 50; ++trial) {
    // A byte uniformly among all the checkpoint's bytes, changed to any other value.
    size_t at = rng() % total, f = 0;
    while (at >= contents[f].size()) at -= contents[f++].size();
    std::string damaged = contents[f];
    damaged[at] = static_cast<char>(damaged[at] ^ (1 + rng() % 255));
    Spill(files[f], damaged);
    const std::string context = absl::StrFormat("trial %d: byte %d of %s", trial, at, files[f]);

    ExpectRefusedAndFallBack(files[f], context);
    // Where the byte is in an extent, the reader (which checks extents as it reads them) finds
    // it too. The message names the checksum expected and never the bytes' own: a checksum of
    // chosen bytes would tell a caller of SubmitJob(resume_from) about any file it can name.
    absl::Status v = VerifyCheckpoint(PosixEnv(), newest_);
    if (v.message().find("extent") != std::string::npos) {
      ++in_extents;
      EXPECT_THAT(v.message(), HasSubstr("checksum expected 0x")) << context;
      EXPECT_THAT(v.message(), HasSubstr(", the bytes differ")) << context;
      EXPECT_THAT(v.message(), Not(HasSubstr("actual"))) << context;
      auto reader = OpenCheckpoint(PosixEnv(), newest_);
      ASSERT_TRUE(reader.ok()) << context;
      const std::string process = files[f].ends_with("worker-0.state") ? "worker-0" : "worker-1";
      EXPECT_EQ((*reader)->ReadProcess(process).status().code(), absl::StatusCode::kDataLoss)
          << context;
    }
    Spill(files[f], contents[f]);
    ASSERT_TRUE(VerifyCheckpoint(PosixEnv(), newest_).ok()) << context;
  }
  EXPECT_GT(in_extents, 0);  // the draw reached extents, not only headers and the manifest
}

TEST_F(CheckpointCorruption, TruncatedFilesAreDetected) {
  for (const std::string& f : FilesUnder(newest_)) {
    const std::string data = Slurp(f);
    for (size_t keep : {size_t{0}, data.size() / 2, data.size() - 1}) {
      Spill(f, data.substr(0, keep));
      ExpectRefusedAndFallBack(f, f + " cut to " + std::to_string(keep));
      EXPECT_FALSE(OpenCheckpoint(PosixEnv(), newest_).ok());
    }
    // A file that grew is as wrong as one that shrank.
    Spill(f, data + "x");
    ExpectRefusedAndFallBack(f, f + " extended");
    Spill(f, data);
  }
  EXPECT_TRUE(VerifyCheckpoint(PosixEnv(), newest_).ok());
}

TEST_F(CheckpointCorruption, MissingFilesAreDetected) {
  for (const std::string& f : FilesUnder(newest_)) {
    const std::string data = Slurp(f);
    std::filesystem::remove(f);
    ExpectRefusedAndFallBack(f, f + " removed");
    auto list = ListCheckpoints(PosixEnv(), dir_->path());
    ASSERT_TRUE(list.ok());
    EXPECT_THAT(list->back().problem, HasSubstr(std::filesystem::path(f).filename().string()));
    Spill(f, data);
  }
}

TEST_F(CheckpointCorruption, EveryCheckpointBrokenIsNotFoundWithTheReasons) {
  std::filesystem::remove(dir_->path() + "/it-00000010/worker-1.state");
  std::filesystem::remove(newest_ + "/MANIFEST");
  auto resolved = ResolveCheckpoint(PosixEnv(), dir_->path());
  EXPECT_EQ(resolved.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(resolved.status().message(), HasSubstr("it-00000020: "));
  EXPECT_THAT(resolved.status().message(), HasSubstr("MANIFEST"));
  EXPECT_THAT(resolved.status().message(), HasSubstr("worker-1.state"));
}

// The reasons go into the job's status and to the operator: a directory of many broken
// checkpoints lists the newest few and counts the rest.
TEST_F(CheckpointCorruption, ManyBrokenCheckpointsAreListedBoundedThenCounted) {
  constexpr int kBroken = 12;
  for (int i = 0; i < kBroken; ++i) {
    const int64_t it = 30 + 10 * i;
    ASSERT_TRUE(SaveCheckpoint(PosixEnv(), dir_->path(), it, 2).ok());
    std::filesystem::remove(dir_->path() + "/" + CheckpointId(it) + "/worker-1.state");
  }
  std::filesystem::remove(newest_ + "/worker-1.state");
  auto resolved = ResolveCheckpoint(PosixEnv(), dir_->path());
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->id, "it-00000010");
  ASSERT_EQ(resolved->skipped.size(), ResolvedCheckpoint::kMaxSkippedListed + 1);
  EXPECT_THAT(resolved->skipped[0], HasSubstr(CheckpointId(30 + 10 * (kBroken - 1)) + ": "));
  EXPECT_EQ(resolved->skipped.back(),
            absl::StrFormat("and %d older broken checkpoint(s)", kBroken + 1 - 8));
  for (const auto& why : resolved->skipped) {
    EXPECT_LE(why.size(), ResolvedCheckpoint::kMaxSkippedBytes + 4);
  }
}

TEST_F(CheckpointCorruption, AManifestOfAnotherCheckpointIsRefused) {
  std::filesystem::copy_file(dir_->path() + "/it-00000010/MANIFEST", newest_ + "/MANIFEST",
                             std::filesystem::copy_options::overwrite_existing);
  ExpectRefusedAndFallBack(newest_ + "/MANIFEST", "it-10's manifest in it-20");
}

TEST(CheckpointPaths, WhatIsNotACheckpointIsAClearError) {
  auto dir = TempDir::Create("ckpt-not");
  ASSERT_TRUE(dir.ok());
  Env& env = PosixEnv();
  // A directory of other things.
  Spill(dir->path() + "/notes.txt", "hello");
  ASSERT_TRUE(env.CreateDirs(dir->path() + "/data").ok());
  auto r = ResolveCheckpoint(env, dir->path());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("holds no checkpoint"));
  EXPECT_EQ(OpenCheckpoint(env, dir->path()).status().code(), absl::StatusCode::kNotFound);
  auto list = ListCheckpoints(env, dir->path());
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
  // A file.
  r = ResolveCheckpoint(env, dir->path() + "/notes.txt");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ListCheckpoints(env, dir->path() + "/notes.txt").status().code(),
            absl::StatusCode::kFailedPrecondition);
  // Nothing there.
  r = ResolveCheckpoint(env, dir->path() + "/nowhere");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("nowhere"));
  // A directory named like a checkpoint without a manifest (a copy cut short).
  ASSERT_TRUE(env.CreateDirs(dir->path() + "/it-00000005").ok());
  r = ResolveCheckpoint(env, dir->path() + "/it-00000005");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(), HasSubstr("MANIFEST"));
  // A temporary directory is never read.
  ASSERT_TRUE(env.CreateDirs(dir->path() + "/.tmp-it-00000006").ok());
  r = ResolveCheckpoint(env, dir->path());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace herd::checkpoint
