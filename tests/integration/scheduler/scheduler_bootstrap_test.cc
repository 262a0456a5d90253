// Worker processes that are given only the scheduler's address: each registers, learns its
// rank from the scheduler, builds a UCX communicator through the scheduler-backed Store and
// joins a ring all-reduce with the others. No file store, no rank on the command line. And what
// building a communicator costs the scheduler: one StoreSet and one StoreGetMany per rank, one
// StoreGet more for each peer outside the bootstrap set that a rank talks to later.
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

#include <map>
#include <random>
#include <set>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "algorithms/collectives/allgather.h"
#include "algorithms/collectives/allreduce.h"
#include "algorithms/collectives/alltoall.h"
#include "bench/control_plane/bootstrap_load.h"
#include "common/status.h"
#include "scheduler/client/scheduler_client.h"
#include "tests/integration/scheduler/scheduler_process.h"
#include "tests/unit/scheduler/test_jobs.h"
#include "transport/ucx/bootstrap_peers.h"
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

constexpr char kRingSpec[] = R"(name: ring4
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
  std::ofstream(spec) << kRingSpec;
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

constexpr int kCounted = 9;
constexpr char kCountedSpec[] = R"(name: counted
mode: allreduce
workers: 9
servers: 0
tensors:
  - {name: w, shape: [16], dtype: fp32}
)";
constexpr int kPairRounds = 4;

// The random pairs of round k, the same on every process (a shared seed, as plans give them):
// partner[k][r], or -1 when r sits the round out.
std::vector<std::vector<int>> RandomPairs() {
  std::vector<std::vector<int>> partner(kPairRounds, std::vector<int>(kCounted, -1));
  std::mt19937 rng(3);
  for (auto& round : partner) {
    std::vector<int> order(kCounted);
    for (int r = 0; r < kCounted; ++r) order[r] = r;
    std::shuffle(order.begin(), order.end(), rng);
    for (int i = 0; i + 1 < kCounted; i += 2) {
      round[order[i]] = order[i + 1];
      round[order[i + 1]] = order[i];
    }
  }
  return partner;
}

// One rank of the counted job: builds the communicator through a counting client, runs the
// collectives, the random pairs and an all-to-all, and writes the store calls it made after
// each phase as "<phase> <sets> <gets> <get_manys>" lines.
absl::Status RunCountedRank(const std::string& address, int rank, int report_fd) {
  ClientOptions o;
  o.address = address;
  HERD_ASSIGN_OR_RETURN(std::unique_ptr<SchedulerClient> client, SchedulerClient::Connect(o));
  auto counting = std::make_shared<bench::CountingSchedulerClient>(std::move(client));
  transport::UcxOptions ucx;
  ucx.prefix = "epoch-1";
  ucx.bootstrap_timeout = 60s;
  HERD_ASSIGN_OR_RETURN(std::unique_ptr<transport::Communicator> comm,
                        transport::CreateUcxCommunicator(
                            rank, kCounted, worker::MakeSchedulerStore(counting, "counted"), ucx));
  auto report = [&](const char* phase) {
    const std::string line =
        absl::StrFormat("%s %d %d %d\n", phase, counting->store_sets.load(),
                        counting->store_gets.load(), counting->store_get_manys.load());
    (void)!::write(report_fd, line.data(), line.size());
  };
  report("built");

  std::vector<float> data(4096, static_cast<float>(rank + 1));
  collectives::AllReduceOptions ar;
  ar.comm = comm.get();
  ar.data = data.data();
  ar.count = data.size();
  ar.timeout = 30s;
  HERD_RETURN_IF_ERROR(collectives::RingAllReduce(ar));
  ar.tag = 1;
  HERD_RETURN_IF_ERROR(collectives::RecursiveHalvingAllReduce(ar));
  if (data[7] != static_cast<float>(kCounted * (kCounted + 1) / 2 * kCounted)) {
    return absl::DataLossError(absl::StrFormat("rank %d: sum %g", rank, data[7]));
  }
  std::vector<int32_t> gathered(kCounted * 10, rank);
  collectives::AllGatherOptions ag;
  ag.comm = comm.get();
  ag.dtype = DType::kInt32;
  ag.data = gathered.data();
  ag.count = gathered.size();
  ag.timeout = 30s;
  ag.tag = 2;
  for (int r = 0; r < kCounted; ++r) std::fill_n(gathered.begin() + 10 * r, 10, r == rank ? r : -1);
  HERD_RETURN_IF_ERROR(collectives::RecursiveDoublingAllGather(ag));
  for (int r = 0; r < kCounted; ++r) {
    if (gathered[10 * r] != r) return absl::DataLossError("all-gather: wrong chunk");
  }
  report("collectives");

  const auto partner = RandomPairs();
  for (int k = 0; k < kPairRounds; ++k) {
    const int q = partner[k][rank];
    if (q < 0) continue;
    int32_t mine = 100 * rank + k, theirs = -1;
    transport::Tag tag = transport::Tag::Make(transport::OpKind::kUser, 3, k);
    transport::Request rr = comm->irecv(q, tag, AsMutableBytes(&theirs, 4));
    transport::Request s = comm->isend(q, tag, AsBytes(&mine, 4));
    HERD_RETURN_IF_ERROR(comm->WaitAll({&rr, &s}, Deadline::After(30s)));
    if (theirs != 100 * q + k) return absl::DataLossError("random pairs: wrong value");
  }
  report("pairs");

  std::vector<int32_t> in(kCounted * 2), out(kCounted * 2);
  for (int j = 0; j < kCounted; ++j) std::fill_n(in.begin() + 2 * j, 2, 1000 * rank + j);
  collectives::AllToAllOptions a2a;
  a2a.comm = comm.get();
  a2a.dtype = DType::kInt32;
  a2a.input = in.data();
  a2a.output = out.data();
  a2a.count = in.size();
  a2a.timeout = 30s;
  a2a.tag = 4;
  HERD_RETURN_IF_ERROR(collectives::PairwiseAllToAll(a2a));
  for (int j = 0; j < kCounted; ++j) {
    if (out[2 * j] != 1000 * j + rank) return absl::DataLossError("all-to-all: wrong block");
  }
  report("alltoall");
  // Nobody leaves before everybody is done with this rank (a peer's wait must not see it go).
  ar.tag = 5;
  return collectives::RingAllReduce(ar);
}

TEST(SchedulerBootstrap, NineUcxProcessesBuildACommunicatorWithOneSetAndOneGetManyEach) {
  TempDir dir;
  SchedulerProcess proc;
  proc.Start(dir.path() + "/state", 0, {"--heartbeat-timeout", "60s"});
  const std::string spec = dir.path() + "/counted.yaml";
  std::ofstream(spec) << kCountedSpec;
  auto submitted = RunHerd({"job", "submit", spec, "--scheduler", proc.address()});
  ASSERT_EQ(submitted.rc, 0) << submitted.out;

  std::vector<std::pair<pid_t, int>> children;
  for (int rank = 0; rank < kCounted; ++rank) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      const absl::Status st = RunCountedRank(proc.address(), rank, fds[1]);
      const std::string text = "status " + st.ToString() + "\n";
      (void)!::write(fds[1], text.data(), text.size());
      ::_exit(st.ok() ? 0 : 1);
    }
    ::close(fds[1]);
    children.emplace_back(pid, fds[0]);
  }
  const auto partner = RandomPairs();
  for (int rank = 0; rank < kCounted; ++rank) {
    std::string report;
    char buf[512];
    for (ssize_t n; (n = ::read(children[rank].second, buf, sizeof buf)) > 0;) {
      report.append(buf, static_cast<size_t>(n));
    }
    ::close(children[rank].second);
    int status = 0;
    ASSERT_EQ(::waitpid(children[rank].first, &status, 0), children[rank].first);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "rank " << rank << ": " << report << "\nscheduler log:\n"
        << proc.log();
    std::map<std::string, std::vector<int>> calls;  // phase -> sets, gets, get_manys
    for (absl::string_view line : absl::StrSplit(report, '\n', absl::SkipEmpty())) {
      std::vector<std::string> f = absl::StrSplit(line, ' ');
      if (f.size() == 4 && f[0] != "status") {
        calls[f[0]] = {std::stoi(f[1]), std::stoi(f[2]), std::stoi(f[3])};
      }
    }
    const std::vector<int> bootstrap = transport::ucx::BootstrapPeers(rank, kCounted);
    const std::set<int> near(bootstrap.begin(), bootstrap.end());
    std::set<int> met;  // random partners outside the bootstrap set
    for (const auto& round : partner) {
      if (round[rank] >= 0 && near.count(round[rank]) == 0) met.insert(round[rank]);
    }
    const int far = kCounted - 1 - static_cast<int>(near.size());
    ASSERT_GT(far, 0) << "9 ranks: each rank has peers outside its bootstrap set";
    EXPECT_EQ(calls["built"], (std::vector<int>{1, 0, 1})) << "rank " << rank << ": " << report;
    EXPECT_EQ(calls["collectives"], (std::vector<int>{1, 0, 1})) << "rank " << rank;
    EXPECT_EQ(calls["pairs"], (std::vector<int>{1, static_cast<int>(met.size()), 1}))
        << "rank " << rank;
    EXPECT_EQ(calls["alltoall"], (std::vector<int>{1, far, 1})) << "rank " << rank;
  }
}

}  // namespace
}  // namespace herd::scheduler
