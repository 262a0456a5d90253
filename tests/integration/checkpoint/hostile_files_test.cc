// Checkpoint files as an attack surface, through the real binaries: special files named like a
// checkpoint's files (a FIFO, which blocks whoever opens it, or a device) make `herd checkpoint
// verify | export | list` and a scheduler's SubmitJob with `resume_from` answer at once with a
// clear error instead of blocking; a manifest re-signed to claim more elements than its files
// hold is refused by `verify` and by `export` before anything that large is allocated.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <limits>
#include <thread>

#include "checkpoint/checkpoint_id.h"
#include "checkpoint/checksum.h"
#include "checkpoint/env.h"
#include "checkpoint/manifest_file.h"
#include "herd/v1/job.pb.h"
#include "scheduler/client/scheduler_client.h"
#include "tests/integration/checkpoint/local_runs.h"
#include "tests/integration/scheduler/scheduler_process.h"
#include "tests/unit/checkpoint/checkpoint_test_util.h"

namespace herd::testing {
namespace {

namespace fs = std::filesystem;
using scheduler::testing::ReadFile;
using scheduler::testing::SchedulerProcess;
using scheduler::testing::SpawnHerd;
using scheduler::testing::WaitExit;
using ::testing::HasSubstr;

// `herd args...` with its output in DIR/name.log; its exit code, or -1 when it did not end
// within `seconds` (then it was killed).
struct Finished {
  int rc = -1;
  std::string out;
};
Finished RunWithin(const std::vector<std::string>& args, const std::string& log, int seconds) {
  const pid_t pid = SpawnHerd(args, log);
  const int status = WaitExit(pid, seconds);
  Finished f;
  f.out = ReadFile(log);
  if (status >= 0 && WIFEXITED(status)) f.rc = WEXITSTATUS(status);
  if (status >= 0 && WIFSIGNALED(status)) f.rc = 128 + WTERMSIG(status);
  return f;
}

class HostileCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = scratch_.path + "/ckpt";
    ASSERT_TRUE(checkpoint::testing::SaveCheckpoint(checkpoint::PosixEnv(), root_, 10, 2).ok());
    one_ = root_ + "/" + checkpoint::CheckpointId(10);
  }
  // Replaces `path` by a FIFO (no writer ever opens it: a blocking open never returns).
  void MakeFifo(const std::string& path) {
    fs::remove(path);
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << path;
  }
  std::string Log(const std::string& name) const { return scratch_.path + "/" + name + ".log"; }

  ScratchDir scratch_;
  std::string root_, one_;
};

TEST_F(HostileCheckpoint, AFifoForAStateFileIsRefusedAtOnceByVerifyAndExport) {
  MakeFifo(one_ + "/worker-0.state");
  for (const std::string& path : {one_, root_}) {
    Finished v = RunWithin({"checkpoint", "verify", path}, Log("verify"), 10);
    EXPECT_EQ(v.rc, 1) << "verify " << path << " did not end with 1 within 10 s: " << v.out;
    EXPECT_THAT(v.out, HasSubstr("not a regular file")) << v.out;
    Finished e = RunWithin({"checkpoint", "export", path, "--out", scratch_.path + "/model.pt"},
                           Log("export"), 10);
    EXPECT_EQ(e.rc, 1) << "export " << path << " did not end with 1 within 10 s: " << e.out;
    EXPECT_THAT(e.out, HasSubstr("not a regular file")) << e.out;
  }
}

TEST_F(HostileCheckpoint, AFifoForAManifestOrLatestIsRefusedAtOnce) {
  MakeFifo(root_ + "/LATEST");
  Finished list = RunWithin({"checkpoint", "list", root_}, Log("list"), 10);
  // LATEST is a hint: the list goes on without it.
  EXPECT_EQ(list.rc, 0) << "list did not end within 10 s: " << list.out;
  EXPECT_THAT(list.out, HasSubstr("it-00000010")) << list.out;

  MakeFifo(one_ + "/MANIFEST");
  Finished v = RunWithin({"checkpoint", "verify", one_}, Log("verify"), 10);
  EXPECT_EQ(v.rc, 1) << "verify did not end with 1 within 10 s: " << v.out;
  EXPECT_THAT(v.out, HasSubstr("not a regular file")) << v.out;
  Finished i = RunWithin({"checkpoint", "inspect", one_}, Log("inspect"), 10);
  EXPECT_EQ(i.rc, 1) << "inspect did not end with 1 within 10 s: " << i.out;
}

TEST_F(HostileCheckpoint, ADeviceForAStateFileIsRefused) {
  // /dev/zero has no end: a reader that trusted it would read forever.
  fs::remove(one_ + "/worker-1.state");
  fs::create_symlink("/dev/zero", one_ + "/worker-1.state");
  Finished v = RunWithin({"checkpoint", "verify", one_}, Log("verify"), 10);
  EXPECT_EQ(v.rc, 1) << v.out;
  EXPECT_THAT(v.out, HasSubstr("not a regular file")) << v.out;
}

TEST_F(HostileCheckpoint, ALinkForAStateFileIsRefusedAndWhatItNamesIsNeitherReadNorNamed) {
  // A link to a regular file outside the checkpoint: followed, `verify` would read and
  // checksum any file the caller names (and a writer would overwrite it).
  const std::string outside = scratch_.path + "/outside.bin";
  ASSERT_TRUE(checkpoint::PosixEnv().WriteFile(outside, std::string(4096, 'x')).ok());
  fs::rename(one_ + "/worker-0.state", scratch_.path + "/worker-0.state.real");
  fs::create_symlink(outside, one_ + "/worker-0.state");
  Finished v = RunWithin({"checkpoint", "verify", one_}, Log("verify"), 10);
  EXPECT_EQ(v.rc, 1) << v.out;
  EXPECT_THAT(v.out, HasSubstr("symbolic link")) << v.out;
  EXPECT_THAT(v.out, ::testing::Not(HasSubstr("actual"))) << v.out;
}

// Rewrites the manifest of `one` with `edit` applied and a valid checksum (an attacker with
// write access re-signs it: the checksum guards against damage, not against intent).
void Resign(const std::string& one,
            const std::function<void(herd::v1::CheckpointManifest&)>& edit) {
  auto data = checkpoint::PosixEnv().ReadFile(one + "/MANIFEST");
  ASSERT_TRUE(data.ok()) << data.status();
  auto m = checkpoint::DecodeManifest(*data, one);
  ASSERT_TRUE(m.ok()) << m.status();
  edit(*m);
  ASSERT_TRUE(
      checkpoint::PosixEnv().WriteFile(one + "/MANIFEST", checkpoint::EncodeManifest(*m)).ok());
}

TEST_F(HostileCheckpoint, AManifestClaimingATrillionElementsIsRefusedBeforeAllocating) {
  constexpr int64_t kHuge = int64_t{1} << 40;
  Resign(one_, [](herd::v1::CheckpointManifest& m) {
    m.mutable_layout(0)->set_count(kHuge);
    m.mutable_layout(0)->clear_shape();
    m.mutable_layout(0)->add_shape(kHuge);
    for (auto& f : *m.mutable_files()) {
      for (auto& e : *f.mutable_extents()) {
        if (e.name() == "param/a") e.set_total(kHuge);
      }
    }
  });
  Finished v = RunWithin({"checkpoint", "verify", one_}, Log("verify"), 20);
  EXPECT_EQ(v.rc, 1) << v.out;
  EXPECT_THAT(v.out, HasSubstr("param/a")) << v.out;
  Finished e = RunWithin({"checkpoint", "export", one_, "--out", scratch_.path + "/model.pt"},
                         Log("export"), 20);
  EXPECT_EQ(e.rc, 1) << "export must refuse, not die (134 is std::bad_alloc): " << e.out;
  EXPECT_THAT(e.out, HasSubstr("param/a")) << e.out;
  EXPECT_FALSE(fs::exists(scratch_.path + "/model.pt"));
}

TEST_F(HostileCheckpoint, ExtentsThatShareTheirBytesAreRefused) {
  // Two extents pointing at the same bytes would let a file "hold" more elements than its
  // size: each is checked, but together they claim twice what is there.
  Resign(one_, [](herd::v1::CheckpointManifest& m) {
    auto* f = m.mutable_files(0);
    for (auto& e : *f->mutable_extents()) {
      if (e.name() == "momentum/a") {
        for (const auto& p : f->extents()) {
          if (p.name() == "param/a") {
            e.set_byte_offset(p.byte_offset());
            e.set_checksum(p.checksum());
          }
        }
      }
    }
  });
  Finished v = RunWithin({"checkpoint", "verify", one_}, Log("verify"), 20);
  EXPECT_EQ(v.rc, 1) << v.out;
  EXPECT_THAT(v.out, HasSubstr("overlap")) << v.out;
}

TEST_F(HostileCheckpoint, AWorkerCountFarBeyondTheFilesIsRefused) {
  // The readers look for worker-0 .. worker-(N-1): a count of two billion would have them loop
  // for minutes over processes that are not there.
  Resign(one_, [](herd::v1::CheckpointManifest& m) { m.set_workers(2000000000); });
  Finished v = RunWithin({"checkpoint", "verify", one_}, Log("verify"), 20);
  EXPECT_EQ(v.rc, 1) << v.out;
  EXPECT_THAT(v.out, HasSubstr("workers")) << v.out;
}

TEST_F(HostileCheckpoint, ParametersNoResumeReadsDoNotCountAsHeld) {
  // A resume reads the parameters of worker-0 .. worker-(workers-1) (or the shards'), as
  // fp32: a manifest counting no workers, whose files still hold every parameter, passed
  // verify, and the resumed workers then kept their initial values, training from scratch
  // while reporting a resume.
  Resign(one_, [](herd::v1::CheckpointManifest& m) { m.set_workers(0); });
  Finished v = RunWithin({"checkpoint", "verify", one_}, Log("verify"), 20);
  EXPECT_EQ(v.rc, 1) << v.out;
  EXPECT_THAT(v.out, HasSubstr("not whole")) << v.out;
  // A worker opens DIR/<id> without verifying its files (the scheduler did): the manifest is
  // held to the same rules there, so one swapped in after the scheduler's check is refused.
  Finished i = RunWithin({"checkpoint", "inspect", one_}, Log("inspect"), 20);
  EXPECT_EQ(i.rc, 1) << i.out;
  EXPECT_THAT(i.out, HasSubstr("not whole")) << i.out;
}

TEST_F(HostileCheckpoint, AHundredThousandEmptyExtentsAreCheckedOnceEachAndAWrongOneNamed) {
  // Empty extents hold no bytes and so share none: a manifest may list very many inside
  // another extent. verify checks each once against the checksum of nothing (it kept a
  // checksum state per extent and revisited every open one per 4 MiB chunk).
  const uint64_t of_nothing = checkpoint::StreamingChecksum().Digest();
  Resign(one_, [&](herd::v1::CheckpointManifest& m) {
    auto* f = m.mutable_files(0);
    const int64_t inside = f->extents(0).byte_offset() + 4;
    for (int i = 0; i < 100000; ++i) {
      auto* e = f->add_extents();
      e->set_name("empty/" + std::to_string(i));
      e->set_dtype("fp32");
      e->set_total(1);
      e->set_byte_offset(inside);
      e->set_checksum(of_nothing);
    }
  });
  Finished ok = RunWithin({"checkpoint", "verify", one_}, Log("verify"), 60);
  EXPECT_EQ(ok.rc, 0) << ok.out;
  Resign(one_, [](herd::v1::CheckpointManifest& m) {
    auto* f = m.mutable_files(0);
    f->mutable_extents(f->extents_size() - 1)->set_checksum(7);
  });
  Finished bad = RunWithin({"checkpoint", "verify", one_}, Log("verify-bad"), 60);
  EXPECT_EQ(bad.rc, 1) << bad.out;
  EXPECT_THAT(bad.out, HasSubstr("empty/99999")) << bad.out;
}

TEST_F(HostileCheckpoint, AProcessNameWithANulOrPastAFileNamesLengthIsRefused) {
  // "worker-0\0x.state" would be opened as DIR/<id>/worker-0: a second name for a file, or a
  // name for any file of the directory.
  for (const std::string& name : {std::string("worker-0\0x", 10), std::string(300, 'w')}) {
    fs::remove_all(root_);  // a fresh checkpoint for each name
    ASSERT_TRUE(checkpoint::testing::SaveCheckpoint(checkpoint::PosixEnv(), root_, 10, 2).ok());
    Resign(one_, [&](herd::v1::CheckpointManifest& m) {
      m.mutable_files(0)->set_process(name);
      m.mutable_files(0)->set_file(name + ".state");
    });
    Finished v = RunWithin({"checkpoint", "verify", one_}, Log("verify"), 20);
    EXPECT_EQ(v.rc, 1) << v.out;
    EXPECT_THAT(v.out, HasSubstr("is not named <process>.state")) << v.out;
    EXPECT_LT(v.out.size(), 2000u) << "the name is cut in the message";
  }
}

TEST_F(HostileCheckpoint, ADataPositionOutsideAnyEpochIsRefusedByVerify) {
  // A resumed worker starts its data at these values: a negative epoch made it count its
  // iterations forever, a negative offset index before its samples.
  for (const char* key : {"data/epoch", "data/offset"}) {
    for (const char* value : {"-2", "9223372036854775807", "3x"}) {
      Resign(one_, [&](herd::v1::CheckpointManifest& m) {
        (*m.mutable_files(0)->mutable_values())[key] = value;
      });
      Finished v = RunWithin({"checkpoint", "verify", one_}, Log("verify"), 20);
      EXPECT_EQ(v.rc, 1) << key << "=" << value << ": " << v.out;
      EXPECT_THAT(v.out, HasSubstr(key)) << v.out;
      Resign(one_, [&](herd::v1::CheckpointManifest& m) {
        (*m.mutable_files(0)->mutable_values())[key] = "0";
      });
    }
  }
  Finished v = RunWithin({"checkpoint", "verify", one_}, Log("verify"), 20);
  EXPECT_EQ(v.rc, 0) << "the same checkpoint with valid values verifies: " << v.out;
}

TEST_F(HostileCheckpoint, AShapeOfMoreThanSixteenDimensionsIsRefused) {
  Resign(one_, [](herd::v1::CheckpointManifest& m) {
    auto* t = m.mutable_layout(0);
    const int64_t count = t->count();
    t->clear_shape();
    t->add_shape(count);
    for (int i = 0; i < 16; ++i) t->add_shape(1);
  });
  Finished v = RunWithin({"checkpoint", "verify", one_}, Log("verify"), 20);
  EXPECT_EQ(v.rc, 1) << v.out;
  EXPECT_THAT(v.out, HasSubstr("17 dimensions")) << v.out;
}

TEST_F(HostileCheckpoint, AnIterationNoJobReachesIsRefusedByVerify) {
  // A job resumed there would count its iterations past int64.
  const int64_t far = std::numeric_limits<int64_t>::max() - 1;
  const std::string moved = root_ + "/" + checkpoint::CheckpointId(far);
  fs::rename(one_, moved);
  Resign(moved, [&](herd::v1::CheckpointManifest& m) {
    m.set_id(checkpoint::CheckpointId(far));
    m.set_iteration(far);
  });
  Finished v = RunWithin({"checkpoint", "verify", moved}, Log("verify"), 20);
  EXPECT_EQ(v.rc, 1) << v.out;
  EXPECT_THAT(v.out, HasSubstr("resumes at iteration 9223372036854775806 (at most "
                               "4611686018427387904)"))
      << v.out;
}

TEST_F(HostileCheckpoint, FileSizesThatPassInt64AreAProblemInTheList) {
  Resign(one_, [](herd::v1::CheckpointManifest& m) {
    for (auto& f : *m.mutable_files()) f.set_bytes(std::numeric_limits<int64_t>::max() / 2 + 1);
  });
  Finished f = RunWithin({"checkpoint", "list", root_}, Log("list"), 20);
  EXPECT_THAT(f.out, HasSubstr("makes the total pass 2^63 bytes")) << f.out;
}

TEST_F(HostileCheckpoint, ControlBytesInAManifestReachTheTerminalEscaped) {
  // An escape sequence as the mode would retitle the operator's window or rewrite the lines
  // `list` and `inspect` printed before it.
  Resign(one_, [](herd::v1::CheckpointManifest& m) { m.set_mode("dear\x1b]0;owned\x07"); });
  for (const char* verb : {"list", "inspect"}) {
    Finished f =
        RunWithin({"checkpoint", verb, verb == std::string("list") ? root_ : one_}, Log(verb), 20);
    EXPECT_EQ(f.rc, 0) << verb << ": " << f.out;
    EXPECT_THAT(f.out, HasSubstr("dear\\x1b]0;owned\\x07")) << verb << ": " << f.out;
    EXPECT_EQ(f.out.find('\x1b'), std::string::npos) << verb << ": " << f.out;
  }
}

TEST_F(HostileCheckpoint, SubmitJobResumingFromAFifoAnswersAndTheSchedulerStillStops) {
  MakeFifo(one_ + "/worker-0.state");
  SchedulerProcess sched;
  sched.Start(scratch_.path + "/state", 0);
  scheduler::ClientOptions o;
  o.address = sched.address();
  o.call_timeout = std::chrono::seconds(5);
  auto client = scheduler::SchedulerClient::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  for (int i = 0; i < 8; ++i) {
    herd::v1::JobSpec spec;
    spec.set_name("fifo-" + std::to_string(i));
    spec.set_workers(1);
    spec.mutable_mode()->set_mode("allreduce");
    spec.set_resume_from(i % 2 == 0 ? one_ : root_);
    const auto begin = std::chrono::steady_clock::now();
    auto submitted = (*client)->SubmitJob(spec);
    ASSERT_FALSE(submitted.ok());
    EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(3))
        << submitted.status();
    EXPECT_FALSE(absl::IsDeadlineExceeded(submitted.status())) << submitted.status();
    EXPECT_THAT(std::string(submitted.status().message()), HasSubstr("not a regular file"))
        << submitted.status();
  }
  // No scheduler thread is stuck: SIGTERM ends it at once (a stuck one would make Stop wait
  // until ctest's timeout).
  const auto stopping = std::chrono::steady_clock::now();
  sched.Stop(SIGTERM);
  EXPECT_LT(std::chrono::steady_clock::now() - stopping, std::chrono::seconds(10));
}

}  // namespace
}  // namespace herd::testing
