// The smaller holes of the second hardening round, each against the real processes, each a
// clear error or a documented answer:
//   * a checkpoint or resume path that cannot hold checkpoints (a NUL byte, a relative path,
//     a pseudo file system such as /proc) is refused at submission;
//   * elastic.max_workers above workers for a mode that never grows is refused;
//   * a JobSpec file holding a second YAML document is refused, not half read;
//   * a negative timeout_ms answers at once instead of waiting for the call's deadline;
//   * a shard started without --name on a --state path with a space, or a long one, registers.

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "herd/v1/job.pb.h"
#include "herd/v1/scheduler.grpc.pb.h"
#include "scheduler/client/scheduler_client.h"
#include "tests/integration/scheduler/scheduler_process.h"
#include "tests/integration/scheduler/scheduler_with_client.h"

namespace herd::scheduler {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using ::testing::HasSubstr;
using testing::ReadFile;
using testing::RunHerd;
using testing::SchedulerProcess;
using testing::SpawnHerd;
using testing::TimeScale;

herd::v1::JobSpec Spec(const std::string& name, const std::string& mode = "allreduce") {
  herd::v1::JobSpec spec;
  spec.set_name(name);
  spec.set_workers(2);
  spec.mutable_mode()->set_mode(mode);
  if (mode.rfind("ps_", 0) == 0) spec.set_servers(1);
  auto* t = spec.add_tensors();
  t->set_name("w");
  t->add_shape(16);
  t->set_dtype("fp32");
  return spec;
}

class SmallAnswersTest : public testing::SchedulerWithClient {
 protected:
  SmallAnswersTest() : SchedulerWithClient("herd_small_answers_") {}
};

TEST_F(SmallAnswersTest, CheckpointPathsThatCannotHoldCheckpointsAreRefused) {
  const std::string good = (dir_ / "ckpt").string();
  struct Case {
    std::string dir, resume, says;
  };
  const std::vector<Case> cases = {
      {std::string("/tmp/with\0nul", 13), "", "NUL"},
      {"relative/ckpt", "", "absolute"},
      {"/proc/self/ckpt", "", "/proc"},
      {"/sys/kernel/ckpt", "", "/sys"},
      {good, "relative/ckpt", "absolute"},
      {good, std::string("/tmp/a\0b", 8), "NUL"},
  };
  int n = 0;
  for (const Case& c : cases) {
    auto spec = Spec("paths-" + std::to_string(n++));
    spec.mutable_checkpoint()->set_dir(c.dir);
    if (!c.resume.empty()) spec.set_resume_from(c.resume);
    auto got = client_->SubmitJob(spec);
    ASSERT_FALSE(got.ok()) << "dir '" << c.dir << "' resume '" << c.resume << "'";
    EXPECT_TRUE(absl::IsInvalidArgument(got.status())) << got.status();
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(c.says)) << got.status();
    EXPECT_TRUE(absl::IsNotFound(client_->GetJob(spec.name()).status()));
  }
  auto fine = Spec("fine");
  fine.mutable_checkpoint()->set_dir(good);
  EXPECT_TRUE(client_->SubmitJob(fine).ok());
}

TEST_F(SmallAnswersTest, MaxWorkersAboveWorkersIsRefusedForAModeThatNeverGrows) {
  for (const std::string mode : {"ps_sync", "ps_ec"}) {
    auto spec = Spec("grow-" + mode.substr(3), mode);
    spec.mutable_elastic()->set_min_workers(1);
    spec.mutable_elastic()->set_max_workers(4);
    auto got = client_->SubmitJob(spec);
    ASSERT_FALSE(got.ok()) << mode;
    EXPECT_TRUE(absl::IsInvalidArgument(got.status())) << got.status();
    EXPECT_THAT(std::string(got.status().message()), HasSubstr("max_workers")) << got.status();
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(mode)) << got.status();
  }
  // A mode that grows takes it.
  auto grows = Spec("grows");
  grows.mutable_elastic()->set_min_workers(1);
  grows.mutable_elastic()->set_max_workers(4);
  EXPECT_TRUE(client_->SubmitJob(grows).ok());
}

TEST_F(SmallAnswersTest, ASecondYamlDocumentInAJobSpecFileIsRefused) {
  const std::string file = (dir_ / "two.yaml").string();
  std::ofstream(file) << "name: two\nworkers: 2\nmode: allreduce\n---\nname: other\nworkers: 8\n";
  CliResult validate = RunHerd({"job", "validate", file});
  EXPECT_EQ(validate.rc, 2) << validate.out;
  EXPECT_THAT(validate.out, HasSubstr("document")) << validate.out;
  CliResult submit = RunHerd({"job", "submit", file, "--scheduler", scheduler_.address()});
  EXPECT_EQ(submit.rc, 2) << submit.out;
  EXPECT_TRUE(absl::IsNotFound(client_->GetJob("two").status()));
  // One document, with or without its start and end markers, is fine.
  const std::string one = (dir_ / "one.yaml").string();
  std::ofstream(one) << "---\nname: one\nworkers: 2\nmode: allreduce\n...\n";
  CliResult fine = RunHerd({"job", "validate", one});
  EXPECT_EQ(fine.rc, 0) << fine.out;
}

TEST_F(SmallAnswersTest, ANegativeTimeoutAnswersAtOnce) {
  ASSERT_TRUE(client_->SubmitJob(Spec("wait")).ok());
  auto stub = herd::v1::Scheduler::NewStub(
      grpc::CreateChannel(scheduler_.address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(8));
  herd::v1::StoreGetRequest req;
  req.set_job("wait");
  req.set_key("never-set");
  req.set_timeout_ms(-1);
  herd::v1::StoreGetResponse resp;
  const auto begin = std::chrono::steady_clock::now();
  const grpc::Status st = stub->StoreGet(&ctx, req, &resp);
  const auto took = std::chrono::steady_clock::now() - begin;
  EXPECT_FALSE(st.ok());
  EXPECT_LT(took, std::chrono::seconds(2))
      << "a negative timeout_ms waited "
      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
}

TEST_F(SmallAnswersTest, AShardWithoutANameRegistersFromAnyStatePath) {
  herd::v1::JobSpec spec = Spec("names", "ps_sync");
  spec.set_workers(1);
  ASSERT_TRUE(client_->SubmitJob(spec).ok());
  // A space, and far more than a node name may have (128 bytes).
  const fs::path state = dir_ / "state with a space" / std::string(150, 'd');
  fs::create_directories(state.parent_path());
  const std::string log = (dir_ / "shard.log").string();
  const pid_t pid = SpawnHerd({"server", "--scheduler", scheduler_.address(), "--job", "names",
                               "--state", state.string(), "--listen", "127.0.0.1:0"},
                              log);
  bool in = false;
  for (int i = 0; i < 200 * TimeScale() && !in; ++i) {
    auto job = client_->GetJob("names");
    ASSERT_TRUE(job.ok()) << job.status();
    in = job->servers(0).alive();
    if (!in) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(in) << "the shard did not register: " << ReadFile(log);
  auto job = client_->GetJob("names");
  ASSERT_TRUE(job.ok());
  EXPECT_LE(job->servers(0).name().size(), 128u);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

}  // namespace
}  // namespace herd::scheduler
