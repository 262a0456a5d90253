// Worker processes that are given only the scheduler's address: each registers, learns its
// rank from the scheduler, builds a UCX communicator through the scheduler-backed Store and
// joins a ring all-reduce with the others. No file store, no rank on the command line.
//
// Fork safety: the parent talks to the scheduler only through `herd job` subprocesses, so it
// never starts gRPC or UCX before forking; each child creates its own.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "algorithms/collectives/allreduce.h"
#include "common/status.h"
#include "scheduler/client/scheduler_client.h"
#include "tests/integration/scheduler/scheduler_process.h"
#include "tests/unit/scheduler/test_jobs.h"
#include "transport/ucx/ucx_communicator.h"
#include "worker/scheduler_store.h"

namespace herd::scheduler {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using testing::RunHerd;
using testing::SchedulerProcess;
using testing::TempDir;

constexpr int kWorkers = 4;
constexpr size_t kCount = (size_t{1} << 20) + 3;  // not a multiple of the rank count

constexpr char kSpec[] = R"(name: ring4
mode: decentralized
topology: ring
workers: 4
servers: 0
seed: 11
tensors:
  - {name: w, shape: [1048579], dtype: fp32}
)";

// What rank r contributes at index i; the sum over ranks has a closed form.
float Input(int r, size_t i) { return static_cast<float>((r + 1) * static_cast<int>(i % 97)); }
float ExpectedSum(size_t i) {
  return static_cast<float>(kWorkers * (kWorkers + 1) / 2 * static_cast<int>(i % 97));
}

// The body of one worker process; its result goes to the parent through `report_fd`.
absl::Status RunWorker(const std::string& address, int index) {
  ClientOptions o;
  o.address = address;
  o.call_timeout = 10s;
  HERD_ASSIGN_OR_RETURN(std::unique_ptr<SchedulerClient> client, SchedulerClient::Connect(o));
  std::shared_ptr<SchedulerClient> shared = std::move(client);
  herd::v1::RegisterNodeRequest reg;
  reg.set_job("ring4");
  reg.set_role(herd::v1::ROLE_WORKER);
  reg.set_name(absl::StrFormat("worker-%d", index));
  reg.set_address(absl::StrFormat("127.0.0.1:%d", 9100 + index));
  HERD_ASSIGN_OR_RETURN(herd::v1::RegisterNodeResponse registered, shared->RegisterNode(reg));
  const int rank = registered.rank();

  transport::UcxOptions ucx;
  ucx.bootstrap_timeout = 30s;
  HERD_ASSIGN_OR_RETURN(std::unique_ptr<transport::Communicator> comm,
                        transport::CreateUcxCommunicator(
                            rank, kWorkers, worker::MakeSchedulerStore(shared, "ring4"), ucx));

  std::vector<float> data(kCount);
  for (size_t i = 0; i < kCount; ++i) data[i] = Input(rank, i);
  collectives::AllReduceOptions ar;
  ar.comm = comm.get();
  ar.data = data.data();
  ar.count = data.size();
  ar.timeout = 30s;
  HERD_RETURN_IF_ERROR(collectives::RingAllReduce(ar));
  for (size_t i = 0; i < kCount; ++i) {
    if (data[i] != ExpectedSum(i)) {
      return absl::DataLossError(absl::StrFormat("rank %d: element %d is %g, expected %g", rank, i,
                                                 data[i], ExpectedSum(i)));
    }
  }
  return absl::OkStatus();
}

TEST(SchedulerBootstrap, UcxWorkersThatKnowOnlyTheSchedulerFindEachOtherAndAllReduce) {
  TempDir dir;
  SchedulerProcess proc;
  proc.Start(dir.path() + "/state", 0, {"--heartbeat-timeout", "60s"});
  const std::string spec = dir.path() + "/ring4.yaml";
  std::ofstream(spec) << kSpec;
  auto submitted = RunHerd({"job", "submit", spec, "--scheduler", proc.address()});
  ASSERT_EQ(submitted.rc, 0) << submitted.out;

  struct Child {
    pid_t pid;
    int report_fd;
  };
  std::vector<Child> children;
  for (int index = 0; index < kWorkers; ++index) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      const absl::Status st = RunWorker(proc.address(), index);
      const std::string text = st.ToString();
      (void)!::write(fds[1], text.data(), text.size());
      ::_exit(st.ok() ? 0 : 1);
    }
    ::close(fds[1]);
    children.push_back({pid, fds[0]});
  }

  for (int index = 0; index < kWorkers; ++index) {
    std::string report;
    char buf[512];
    for (ssize_t n; (n = ::read(children[index].report_fd, buf, sizeof buf)) > 0;) {
      report.append(buf, static_cast<size_t>(n));
    }
    ::close(children[index].report_fd);
    int status = 0;
    ASSERT_EQ(::waitpid(children[index].pid, &status, 0), children[index].pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "worker " << index << ": " << report << "\nscheduler log:\n"
        << proc.log();
  }

  // The scheduler saw all four workers, with four different ranks.
  auto list = RunHerd({"job", "list", "--scheduler", proc.address()});
  ASSERT_EQ(list.rc, 0) << list.out;
  EXPECT_THAT(list.out, HasSubstr("4/4")) << list.out;
  auto status = RunHerd({"job", "status", "ring4", "--scheduler", proc.address()});
  ASSERT_EQ(status.rc, 0) << status.out;
  EXPECT_THAT(status.out, HasSubstr("RUNNING")) << status.out;
  for (int index = 0; index < kWorkers; ++index) {
    EXPECT_THAT(status.out, HasSubstr(absl::StrFormat("worker-%d", index))) << status.out;
  }
}

}  // namespace
}  // namespace herd::scheduler
