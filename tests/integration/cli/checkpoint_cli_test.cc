// `herd checkpoint list | verify | inspect | export` through the real binary, on checkpoints
// written with known values by the checkpoint library; the exported model loaded by Python's
// torch (/usr/bin/python3, Debian's python3-torch). And a real job's final checkpoint, exported
// and evaluated in Python on the test set.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_format.h"

#include "checkpoint/env.h"
#include "common/json.h"
#include "common/temp_dir.h"
#include "tests/integration/scheduler/scheduler_process.h"
#include "tests/unit/checkpoint/checkpoint_test_util.h"

namespace herd {
namespace {

using scheduler::testing::CliResult;
using scheduler::testing::RunHerd;
using ::testing::HasSubstr;

// Runs a command through the shell; its exit code and output (stdout and stderr).
CliResult RunShell(const std::string& cmd) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

class CheckpointCli : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = TempDir::Create("ckpt-cli");
    ASSERT_TRUE(dir.ok());
    dir_.emplace(*std::move(dir));
    root_ = dir_->path() + "/ckpt";
    for (int64_t it : {10, 20}) {
      ASSERT_TRUE(checkpoint::testing::SaveCheckpoint(checkpoint::PosixEnv(), root_, it, 2).ok());
    }
  }

  void FlipByte(const std::string& file, size_t at) {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x5a);
    f.seekp(static_cast<std::streamoff>(at));
    f.write(&c, 1);
  }

  std::optional<TempDir> dir_;
  std::string root_;
};

TEST_F(CheckpointCli, ListsAsATableAndAsJson) {
  CliResult table = RunHerd({"checkpoint", "list", root_});
  ASSERT_EQ(table.rc, 0) << table.out;
  EXPECT_THAT(table.out, HasSubstr("it-00000010"));
  EXPECT_THAT(table.out, HasSubstr("it-00000020"));
  EXPECT_THAT(table.out, HasSubstr("(LATEST)"));
  EXPECT_LT(table.out.find("it-00000010"), table.out.find("it-00000020"));  // oldest first

  CliResult js = RunHerd({"checkpoint", "list", root_, "--json"});
  ASSERT_EQ(js.rc, 0) << js.out;
  auto parsed = json::ParseObject(js.out.substr(0, js.out.find('\n')));
  ASSERT_TRUE(parsed.ok()) << parsed.status() << js.out;
  const json::Array* rows = parsed->Find("checkpoints")->array();
  ASSERT_NE(rows, nullptr);
  ASSERT_EQ(rows->size(), 2u);
  const json::Object& newest = *(*rows)[1].object();
  EXPECT_EQ(*newest.GetString("id"), "it-00000020");
  EXPECT_EQ(*newest.GetNumber("iteration"), 20);
  EXPECT_EQ(*newest.GetNumber("workers"), 2);
  EXPECT_EQ(*newest.GetBool("whole"), true);
  EXPECT_EQ(*newest.GetBool("latest"), true);

  CliResult missing = RunHerd({"checkpoint", "list", root_ + "/nowhere"});
  EXPECT_EQ(missing.rc, 1);
  EXPECT_THAT(missing.out, HasSubstr("nowhere"));
}

TEST_F(CheckpointCli, VerifyExitsZeroOnlyWhenEveryChecksumHolds) {
  CliResult ok = RunHerd({"checkpoint", "verify", root_});
  ASSERT_EQ(ok.rc, 0) << ok.out;
  EXPECT_THAT(ok.out, HasSubstr("ok      " + root_ + "/it-00000010"));
  EXPECT_EQ(RunHerd({"checkpoint", "verify", root_ + "/it-00000020"}).rc, 0);

  // One byte of an extent of worker 1's file (past the 64-byte header).
  FlipByte(root_ + "/it-00000020/worker-1.state", 70);
  CliResult bad = RunHerd({"checkpoint", "verify", root_});
  EXPECT_EQ(bad.rc, 1) << bad.out;
  EXPECT_THAT(bad.out, HasSubstr("FAILED  " + root_ + "/it-00000020: DATA_LOSS"));
  EXPECT_THAT(bad.out, HasSubstr("worker-1.state: extent 'param/a'"));
  EXPECT_THAT(bad.out, HasSubstr("checksum expected 0x"));
  EXPECT_THAT(bad.out, HasSubstr("ok      " + root_ + "/it-00000010"));
  EXPECT_EQ(RunHerd({"checkpoint", "verify", root_ + "/it-00000020"}).rc, 1);
  EXPECT_EQ(RunHerd({"checkpoint", "verify", root_ + "/it-00000010"}).rc, 0);

  // Not a checkpoint: a clear error, exit 1. No arguments: a usage error, exit 2.
  CliResult empty = RunHerd({"checkpoint", "verify", dir_->path()});
  EXPECT_EQ(empty.rc, 1);
  EXPECT_THAT(empty.out, HasSubstr("holds no checkpoint"));
  EXPECT_EQ(RunHerd({"checkpoint", "verify"}).rc, 2);
}

TEST_F(CheckpointCli, InspectPrintsTheManifestAsJson) {
  CliResult r = RunHerd({"checkpoint", "inspect", root_ + "/it-00000010", "--json"});
  ASSERT_EQ(r.rc, 0) << r.out;
  auto parsed = json::ParseObject(r.out);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << r.out;
  EXPECT_EQ(*parsed->GetString("id"), "it-00000010");
  EXPECT_EQ(*parsed->GetString("iteration"), "10");  // int64 in protobuf's JSON
  EXPECT_EQ(*parsed->GetNumber("workers"), 2);
  const json::Array* files = parsed->Find("files")->array();
  ASSERT_NE(files, nullptr);
  ASSERT_EQ(files->size(), 2u);
  EXPECT_EQ(*(*files)[0].object()->GetString("file"), "worker-0.state");
  EXPECT_EQ((*files)[0].object()->Find("extents")->array()->size(), 4u);

  CliResult text = RunHerd({"checkpoint", "inspect", root_});  // DIR: the newest good one
  ASSERT_EQ(text.rc, 0) << text.out;
  EXPECT_THAT(text.out, HasSubstr("checkpoint it-00000020"));
}

TEST_F(CheckpointCli, ExportedModelLoadsInPythonTorch) {
  const std::string model = dir_->path() + "/model.pt";
  // The newest (it-20) is damaged: export of DIR falls back to it-10 and says so.
  FlipByte(root_ + "/it-00000020/worker-0.state", 70);
  CliResult r = RunHerd({"checkpoint", "export", root_, "--out", model});
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("skipped it-00000020: "));
  EXPECT_THAT(r.out, HasSubstr("exported 2 tensors (17 parameters)"));
  ASSERT_TRUE(std::filesystem::exists(model));

  const std::string script =
      std::string(HERD_SOURCE_DIR) + "/tests/integration/cli/load_exported_model.py";
  CliResult loaded = RunShell("/usr/bin/python3 " + script + " " + model + " 10");
  EXPECT_EQ(loaded.rc, 0) << loaded.out;
  EXPECT_THAT(loaded.out, HasSubstr("values match"));

  // Asked for the damaged one by name: refused, nothing written.
  CliResult bad =
      RunHerd({"checkpoint", "export", root_ + "/it-00000020", "--out", dir_->path() + "/bad.pt"});
  EXPECT_EQ(bad.rc, 1) << bad.out;
  EXPECT_THAT(bad.out, HasSubstr("DATA_LOSS"));
  EXPECT_FALSE(std::filesystem::exists(dir_->path() + "/bad.pt"));
}

// A job with a checkpoint directory ends with its final state committed ("final", at the
// iteration after the last); exported, it is the trained model: evaluated by Python's torch on
// the test set it gives the accuracy the job reported.
TEST(CheckpointCliTrained, TheFinalCheckpointExportsTheTrainedModel) {
  auto dir = TempDir::Create("ckpt-trained");
  ASSERT_TRUE(dir.ok());
  const std::string root = dir->path() + "/ckpt", model = dir->path() + "/model.pt";
  CliResult trained = RunHerd({"local", "--workers", "2", "--mode", "allreduce", "--model", "mlp",
                               "--epochs", "1", "--train-samples", "6400", "--checkpoint-dir", root,
                               "--checkpoint-every", "40", "--json"});
  ASSERT_EQ(trained.rc, 0) << trained.out;
  const size_t at = trained.out.find("\"test_accuracy\":");
  ASSERT_NE(at, std::string::npos) << trained.out;
  const double reported = std::stod(trained.out.substr(at + 16));
  EXPECT_GT(reported, 0.5) << trained.out;

  // 6400 samples / (2 x 64) = 50 iterations: the policy's at 40, and the final at 50.
  CliResult listed = RunHerd({"checkpoint", "list", root});
  ASSERT_EQ(listed.rc, 0) << listed.out;
  EXPECT_THAT(listed.out, HasSubstr("it-00000040"));
  EXPECT_THAT(listed.out, HasSubstr("it-00000050"));
  CliResult exported = RunHerd({"checkpoint", "export", root, "--out", model});
  ASSERT_EQ(exported.rc, 0) << exported.out;
  EXPECT_THAT(exported.out, HasSubstr("it-00000050"));

  const std::string script =
      std::string(HERD_SOURCE_DIR) + "/tests/integration/cli/evaluate_exported_model.py";
  CliResult evaluated =
      RunShell(absl::StrFormat("/usr/bin/python3 %s %s mlp /usr/share/datasets/fashion-mnist %.4f",
                               script, model, reported));
  EXPECT_EQ(evaluated.rc, 0) << evaluated.out;

  // A resume from the final checkpoint has nothing left to train, and says so.
  CliResult again =
      RunHerd({"local", "--workers", "2", "--mode", "allreduce", "--model", "mlp", "--epochs", "1",
               "--train-samples", "6400", "--resume", root + "/it-00000050"});
  ASSERT_EQ(again.rc, 0) << again.out;
  EXPECT_THAT(again.out, HasSubstr("nothing left to train: resumed from"));
  EXPECT_THAT(again.out, HasSubstr("at iteration 50, the end of the job"));
}

}  // namespace
}  // namespace herd
