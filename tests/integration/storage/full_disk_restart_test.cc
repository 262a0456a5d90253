// A full disk must not become a lock-out: the real `herd scheduler`, SIGKILLed while its disk
// (a real tmpfs of a few MiB) was full and writes were being refused, starts again once the
// disk has grown: the torn tail of its write-ahead log is the write it refused, never
// acknowledged. What was acknowledged is all there, and a process of a running job that heard
// the newest state sequence finds it. A torn tail that took an acknowledged write is still
// refused: the job's processes are the witnesses (scheduler/witness.cc).

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "herd/v1/job.pb.h"
#include "scheduler/client/scheduler_client.h"
#include "tests/integration/scheduler/scheduler_process.h"
#include "tests/integration/storage/small_disk.h"
#include "tests/integration/storage/wal_surgery.h"

namespace herd {
namespace {

namespace fs = std::filesystem;
using scheduler::testing::ReadFile;
using scheduler::testing::SpawnHerd;
using scheduler::testing::TimeScale;
using scheduler::testing::WaitExit;

herd::v1::JobSpec Job(const std::string& name, int pad_tensors = 0) {
  herd::v1::JobSpec spec;
  spec.set_name(name);
  spec.mutable_mode()->set_mode("ps_sync");
  spec.set_workers(1);
  spec.set_servers(1);
  auto* t = spec.add_tensors();
  t->set_name("w");
  t->add_shape(64);
  t->set_dtype("fp32");
  for (int i = 0; i < pad_tensors; ++i) {  // a spec larger than a full disk has room for
    auto* p = spec.add_tensors();
    p->set_name("pad" + std::to_string(i) + std::string(200, 'x'));
    p->add_shape(1);
    p->set_dtype("fp32");
  }
  return spec;
}

// A tmpfs of its own that outlives the processes using it: a keeper process holds a user and
// mount namespace with the tmpfs mounted on `mount_point`; the scheduler runs inside it
// (nsenter), is killed and restarted there, and the disk is grown by a remount.
class KeptDisk {
 public:
  ~KeptDisk() { Stop(); }
  void Start(const std::string& mount_point, int size_kib, const std::string& ready) {
    mount_point_ = mount_point;
    pid_ = fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      const std::string script = "mount -t tmpfs -o size=" + std::to_string(size_kib) +
                                 "k tmpfs \"$0\" && touch \"$1\" && exec sleep 3600";
      execlp("unshare", "unshare", "-rm", "sh", "-c", script.c_str(), mount_point.c_str(),
             ready.c_str(), nullptr);
      _exit(127);
    }
    for (int i = 0; i < 500 && !fs::exists(ready); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_TRUE(fs::exists(ready)) << "the keeper did not mount its tmpfs";
  }
  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // `command` run inside the keeper's namespaces.
  std::vector<std::string> Inside(std::vector<std::string> command) const {
    std::vector<std::string> argv = {"nsenter", "-t", std::to_string(pid_),
                                     "-U",      "-m", "--preserve-credentials"};
    argv.insert(argv.end(), command.begin(), command.end());
    return argv;
  }
  bool Grow(int size_kib) const {
    std::string cmd;
    for (const auto& a :
         Inside({"mount", "-o", "remount,size=" + std::to_string(size_kib) + "k", mount_point_})) {
      cmd += "'" + a + "' ";
    }
    return std::system(cmd.c_str()) == 0;
  }
  // Fills the disk with a ballast file until the kernel says it is full.
  int64_t Fill() const {
    const std::string ballast =
        "/proc/" + std::to_string(pid_) + "/root" + mount_point_ + "/ballast";
    std::ofstream out(ballast, std::ios::binary | std::ios::app);
    const std::string block(4096, 'b');
    int64_t total = 0;
    while (out.write(block.data(), block.size()) && out.flush()) total += block.size();
    return total;
  }

 private:
  pid_t pid_ = -1;
  std::string mount_point_;
};

class FullDiskRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("herd_full_disk_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "state");
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << "scheduler log:\n" << ReadFile(Log()) << "\n";
    StopScheduler(SIGKILL);
    disk_.Stop();
    fs::remove_all(dir_);
  }
  std::string Log() const { return (dir_ / "scheduler.log").string(); }
  std::string State() const { return (dir_ / "state").string(); }

  // Starts `herd scheduler` on the state directory (inside the keeper's namespaces when
  // `inside`), on `port` (0: any), and waits for its port file; -1 when it exited first.
  int StartScheduler(int port, bool inside, int* exit_status = nullptr) {
    const std::string port_file = (dir_ / "scheduler.port").string();
    fs::remove(port_file);
    std::vector<std::string> args = {HERD_BINARY,   "scheduler",
                                     "--state",     State(),
                                     "--listen",    "127.0.0.1:" + std::to_string(port),
                                     "--port-file", port_file};
    if (inside) args = disk_.Inside(args);
    std::ofstream(Log(), std::ios::app) << "---- start\n";
    pid_ = fork();
    if (pid_ == 0) {
      FILE* log = std::fopen(Log().c_str(), "a");
      if (log != nullptr) {
        dup2(fileno(log), 1);
        dup2(fileno(log), 2);
      }
      std::vector<char*> raw;
      for (auto& a : args) raw.push_back(a.data());
      raw.push_back(nullptr);
      execvp(raw[0], raw.data());
      _exit(127);
    }
    for (int i = 0; i < 1000 * TimeScale(); ++i) {
      std::ifstream in(port_file);
      int got = 0;
      if (in >> got && got > 0) return got;
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        if (exit_status != nullptr) *exit_status = status;
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }
  void StopScheduler(int sig) {
    if (pid_ <= 0) return;
    kill(pid_, sig);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  std::unique_ptr<scheduler::SchedulerClient> Client(int port) {
    scheduler::ClientOptions o;
    o.address = "127.0.0.1:" + std::to_string(port);
    auto c = scheduler::SchedulerClient::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }
  // Registers this test as worker w0 of `job`: from then on its client is a witness of the
  // state sequence, as every process of a job is.
  uint64_t RegisterWorker(scheduler::SchedulerClient& c, const std::string& job) {
    herd::v1::RegisterNodeRequest reg;
    reg.set_job(job);
    reg.set_role(herd::v1::ROLE_WORKER);
    reg.set_name("w0");
    auto r = c.RegisterNode(reg);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->node_id() : 0;
  }

  fs::path dir_;
  KeptDisk disk_;
  pid_t pid_ = -1;
};

TEST_F(FullDiskRestartTest, KilledOnAFullDiskTheSchedulerStartsOnceTheDiskHasGrown) {
  if (!testing::SmallDiskProcess::Supported()) {
    GTEST_SKIP() << "unshare -rm with tmpfs is not allowed here";
  }
  disk_.Start(State(), 4096, (dir_ / "mounted").string());
  const int port = StartScheduler(0, /*inside=*/true);
  ASSERT_GT(port, 0) << ReadFile(Log());
  auto client = Client(port);
  ASSERT_TRUE(client->SubmitJob(Job("before")).ok());
  const uint64_t node = RegisterWorker(*client, "before");
  ASSERT_NE(node, 0u);
  const uint64_t heard = client->SeenStateSeq();

  ASSERT_GT(disk_.Fill(), 0);
  // Writes are refused, as a full disk must (UNAVAILABLE, nothing changed); a few of them, as
  // a busy scheduler would see.
  for (int i = 0; i < 3; ++i) {
    auto refused = client->SubmitJob(Job("during-" + std::to_string(i), 400));
    ASSERT_FALSE(refused.ok());
    EXPECT_TRUE(absl::IsUnavailable(refused.status())) << refused.status();
  }
  StopScheduler(SIGKILL);  // a pod killed while its disk was full

  ASSERT_TRUE(disk_.Grow(65536)) << "remount of the tmpfs failed";
  int status = 0;
  const int again = StartScheduler(port, /*inside=*/true, &status);
  ASSERT_GT(again, 0) << "the scheduler did not start after the disk grew (exit status " << status
                      << "): " << ReadFile(Log());
  // Everything acknowledged is there; the witness that heard the newest number is satisfied.
  herd::v1::HeartbeatRequest beat;
  beat.set_job("before");
  beat.set_node_id(node);
  auto beat_ok = client->Heartbeat(beat);
  EXPECT_TRUE(beat_ok.ok()) << beat_ok.status();
  EXPECT_GE(client->SeenStateSeq(), heard);
  auto job = client->GetJob("before");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->workers(0).name(), "w0");
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(absl::IsNotFound(client->GetJob("during-" + std::to_string(i)).status()));
  }
  // And it writes again.
  EXPECT_TRUE(client->SubmitJob(Job("after")).ok());
  EXPECT_NE(ReadFile(Log()).find("never acknowledged"), std::string::npos) << ReadFile(Log());
}

TEST_F(FullDiskRestartTest, ATornTailThatTookAnAcknowledgedWriteIsStillRefused) {
  int port = StartScheduler(0, /*inside=*/false);
  ASSERT_GT(port, 0) << ReadFile(Log());
  auto client = Client(port);
  ASSERT_TRUE(client->SubmitJob(Job("cut")).ok());
  const uint64_t node = RegisterWorker(*client, "cut");  // acknowledged: the witness heard it
  ASSERT_NE(node, 0u);
  StopScheduler(SIGKILL);

  // Cut the log inside its last batch (the registration): a torn tail like the one a refused
  // write leaves, but this one took a write that was acknowledged.
  const fs::path log = testing::NewestLog(State());
  ASSERT_FALSE(log.empty());
  const std::vector<uint64_t> ends = testing::BatchEnds(log);
  ASSERT_GE(ends.size(), 2u);
  fs::resize_file(log, ends[ends.size() - 2] + (ends.back() - ends[ends.size() - 2]) / 2);

  ASSERT_GT(StartScheduler(port, /*inside=*/false), 0) << ReadFile(Log());
  herd::v1::HeartbeatRequest beat;
  beat.set_job("cut");
  beat.set_node_id(node);
  auto refused = client->Heartbeat(beat);
  ASSERT_TRUE(absl::IsDataLoss(refused.status())) << refused.status();
  EXPECT_NE(refused.status().message().find("went back in time"), std::string::npos)
      << refused.status();
  StopScheduler(SIGKILL);
  // Recorded: a later start refuses at once.
  const std::string out = (dir_ / "refused.log").string();
  const int status =
      WaitExit(SpawnHerd({"scheduler", "--state", State(), "--listen", "127.0.0.1:0"}, out),
               30 * TimeScale());
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 1) << ReadFile(out);
}

TEST_F(FullDiskRestartTest, DamageInsideTheLogIsStillRefusedAtStart) {
  int port = StartScheduler(0, /*inside=*/false);
  ASSERT_GT(port, 0) << ReadFile(Log());
  auto client = Client(port);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(client->SubmitJob(Job("j" + std::to_string(i))).ok());
  StopScheduler(SIGKILL);
  ASSERT_FALSE(testing::DamageLog(State()).empty());
  int status = 0;
  EXPECT_EQ(StartScheduler(0, /*inside=*/false, &status), -1) << ReadFile(Log());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
  EXPECT_NE(ReadFile(Log()).find("damaged"), std::string::npos) << ReadFile(Log());
}

}  // namespace
}  // namespace herd
