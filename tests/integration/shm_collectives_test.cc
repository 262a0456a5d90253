// The shared-memory and hierarchical collectives between real processes over the UCX backend:
// four ranks on one host (shm), and two hosts of two (hier; the host identity is forced per pair,
// so the hosts talk TCP over loopback). Results are checked against a reference every process
// computes locally; a rank SIGKILLed mid-collective is named by every survivor within the
// bound of every other algorithm, and leaves no segment behind in /dev/shm.

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "algorithms/collectives/run.h"
#include "algorithms/collectives/topology.h"
#include "common/status.h"
#include "tests/integration/killed_rank_expectations.h"
#include "tests/integration/process_ranks.h"
#include "transport/shm/shm_domain.h"

namespace herd::collectives {
namespace {

using transport::Communicator;
using namespace std::chrono_literals;

constexpr size_t kCount = 3'000'017;  // about 12 MiB of fp32; chunks of unequal sizes

// Element i of rank r's input: an integer in [-100, 100], so every sum is exact.
double InputOf(int rank, size_t i) {
  uint64_t x = (uint64_t(rank) << 40) ^ (i * 0x9e3779b97f4a7c15ull);
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  return static_cast<double>(static_cast<int>(x % 201) - 100);
}

template <typename T>
std::vector<T> Input(int rank, size_t count) {
  std::vector<T> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<T>(InputOf(rank, i));
  return v;
}

template <typename T>
absl::Status Expect(const std::vector<T>& got, size_t begin, size_t end,
                    const std::function<double(size_t)>& want, const std::string& what) {
  for (size_t i = begin; i < end; ++i) {
    if (static_cast<double>(got[i]) != static_cast<double>(static_cast<T>(want(i)))) {
      return absl::DataLossError(absl::StrFormat("%s: element %d is %g, expected %g", what, i,
                                                 static_cast<double>(got[i]), want(i)));
    }
  }
  return absl::OkStatus();
}

double SumOf(int P, size_t i) {
  double s = 0;
  for (int q = 0; q < P; ++q) s += InputOf(q, i);
  return s;
}

// All-reduce (fp32 sum, fp64 avg), reduce-scatter, all-gather and broadcast with `algorithm`.
absl::Status CheckAll(Communicator& comm, Algorithm algorithm) {
  const int P = comm.size(), r = comm.rank();
  const std::string name(AlgorithmName(algorithm));
  {
    std::vector<float> data = Input<float>(r, kCount);
    AllReduceOptions o;
    o.comm = &comm;
    o.data = data.data();
    o.count = kCount;
    o.timeout = 60s;
    HERD_RETURN_IF_ERROR(AllReduce(o, algorithm));
    HERD_RETURN_IF_ERROR(Expect(
        data, 0, kCount, [&](size_t i) { return SumOf(P, i); }, name + " all-reduce fp32 sum"));
  }
  {
    std::vector<double> data = Input<double>(r, kCount);
    AllReduceOptions o;
    o.comm = &comm;
    o.dtype = DType::kFloat64;
    o.op = ReduceOp::kAverage;
    o.data = data.data();
    o.count = kCount;
    o.timeout = 60s;
    HERD_RETURN_IF_ERROR(AllReduce(o, algorithm));
    HERD_RETURN_IF_ERROR(Expect(
        data, 0, kCount, [&](size_t i) { return SumOf(P, i) * (1.0 / P); },
        name + " all-reduce fp64 avg"));
  }
  {
    std::vector<float> data = Input<float>(r, kCount);
    ReduceScatterOptions o;
    o.comm = &comm;
    o.data = data.data();
    o.count = kCount;
    o.tag = 3;
    o.timeout = 60s;
    HERD_RETURN_IF_ERROR(ReduceScatter(o, algorithm));
    const size_t b = ChunkBegin(kCount, P, r);
    HERD_RETURN_IF_ERROR(Expect(
        data, b, b + ChunkSize(kCount, P, r), [&](size_t i) { return SumOf(P, i); },
        name + " reduce-scatter"));
  }
  {
    std::vector<float> data(kCount, -12345.0f);
    const size_t b = ChunkBegin(kCount, P, r), n = ChunkSize(kCount, P, r);
    for (size_t i = b; i < b + n; ++i) data[i] = static_cast<float>(InputOf(r, i));
    AllGatherOptions o;
    o.comm = &comm;
    o.data = data.data();
    o.count = kCount;
    o.tag = 4;
    o.timeout = 60s;
    HERD_RETURN_IF_ERROR(AllGather(o, algorithm));
    HERD_RETURN_IF_ERROR(Expect(
        data, 0, kCount,
        [&](size_t i) {
          int owner = 0;
          while (ChunkBegin(kCount, P, owner + 1) <= i) ++owner;
          return InputOf(owner, i);
        },
        name + " all-gather"));
  }
  {
    const int root = P - 1;
    std::vector<float> data = r == root ? Input<float>(root, kCount) : std::vector<float>(kCount);
    BroadcastOptions o;
    o.comm = &comm;
    o.data = data.data();
    o.count = kCount;
    o.root = root;
    o.tag = 5;
    o.timeout = 60s;
    HERD_RETURN_IF_ERROR(Broadcast(o, algorithm));
    HERD_RETURN_IF_ERROR(Expect(
        data, 0, kCount, [&](size_t i) { return InputOf(root, i); }, name + " broadcast"));
  }
  return absl::OkStatus();
}

// The /dev/shm names of segments this host's processes made (this pid namespace).
std::vector<std::string> SegmentNames() {
  std::vector<std::string> names;
  const std::string prefix = transport::shm::Domain::SegmentPrefix();
  if (DIR* dir = ::opendir("/dev/shm")) {
    while (dirent* e = ::readdir(dir)) {
      if (std::string_view(e->d_name).starts_with(prefix)) names.emplace_back(e->d_name);
    }
    ::closedir(dir);
  }
  return names;
}

// Segments named after one of `pids` (the ranks of a group: its leaders' names carry them).
std::vector<std::string> SegmentsOf(const std::vector<int64_t>& pids) {
  std::vector<std::string> out;
  const std::string prefix = transport::shm::Domain::SegmentPrefix();
  for (const std::string& name : SegmentNames()) {
    for (int64_t pid : pids) {
      if (name.starts_with(absl::StrFormat("%s%d-", prefix, pid))) out.push_back(name);
    }
  }
  return out;
}

void ExpectEveryRankSucceeds(const herd::testing::ProcessRanksOptions& options,
                             const herd::testing::RankBody& body) {
  for (const auto& o : herd::testing::RunProcessRanks(options, body)) {
    EXPECT_TRUE(o.exited && o.exit_code == 0 && o.status.ok()) << o.Describe();
  }
}

TEST(ShmCollectivesTest, FourRanksOnOneHost) {
  herd::testing::ProcessRanksOptions options;
  options.size = 4;
  options.timeout = 180s;
  ExpectEveryRankSucceeds(options, [](Communicator& comm, herd::testing::ParentChannel&) {
    HERD_RETURN_IF_ERROR(CheckAll(comm, Algorithm::kShm));
    HERD_ASSIGN_OR_RETURN(Topology * t, TopologyOf(comm, Deadline::After(10s)));
    if (t->layout().hosts != 1 || t->domain() == nullptr) {
      return absl::InternalError("expected one host with a segment: " + t->layout().Describe());
    }
    // Every rank attached, so the leader removed the name: nothing in /dev/shm to leave behind.
    if (comm.rank() == 0 && !SegmentsOf({static_cast<int64_t>(::getpid())}).empty()) {
      return absl::InternalError("the segment's name is still in /dev/shm");
    }
    return CheckAll(comm, Algorithm::kAuto);
  });
}

TEST(ShmCollectivesTest, TwoHostsOfTwoRanks) {
  herd::testing::ProcessRanksOptions options;
  options.size = 4;
  options.ranks_per_host = 2;
  options.timeout = 180s;
  ExpectEveryRankSucceeds(options, [](Communicator& comm, herd::testing::ParentChannel&) {
    HERD_RETURN_IF_ERROR(CheckAll(comm, Algorithm::kHierarchical));
    HERD_ASSIGN_OR_RETURN(Topology * t, TopologyOf(comm, Deadline::After(10s)));
    if (t->layout().hosts != 2 || t->layout().per_host != 2 || t->domain() == nullptr) {
      return absl::InternalError("expected 2 hosts of 2: " + t->layout().Describe());
    }
    return CheckAll(comm, Algorithm::kAuto);
  });
}

// A rank SIGKILLed a moment into the third all-reduce of 16 MiB; every survivor must name it
// within the bound (ExpectSurvivorsNameTheVictim) and no segment of the group may remain.
void KillMidAllReduce(Algorithm algorithm, int ranks_per_host, int victim) {
  herd::testing::ProcessRanksOptions options;
  options.size = 4;
  options.ranks_per_host = ranks_per_host;
  options.timeout = 60s;
  auto outcomes = herd::testing::RunProcessRanks(
      options,
      [algorithm, victim](Communicator& comm,
                          herd::testing::ParentChannel& parent) -> absl::Status {
        parent.Write(absl::StrFormat("pid %d", ::getpid()));
        std::vector<float> data(size_t{16} << 20 >> 2, 1.0f);
        AllReduceOptions o;
        o.comm = &comm;
        o.data = data.data();
        o.count = data.size();
        o.timeout = 20s;  // far beyond the detection bound checked
        for (int iteration = 0; iteration < 50; ++iteration) {
          std::thread killer;
          if (comm.rank() == victim && iteration == 2) {
            killer = std::thread([&parent] {
              std::this_thread::sleep_for(3ms);
              parent.Stamp("killed_at");
              ::raise(SIGKILL);
            });
          }
          absl::Status st = AllReduce(o, algorithm);
          if (killer.joinable()) killer.join();
          if (!st.ok()) {
            parent.Stamp("failed_at");
            return st;
          }
        }
        return absl::OkStatus();
      });
  herd::testing::ExpectSurvivorsNameTheVictim(outcomes, victim);
  std::vector<int64_t> pids;
  for (const auto& o : outcomes) pids.push_back(o.Stamp("pid"));
  EXPECT_THAT(SegmentsOf(pids), ::testing::IsEmpty());
}

TEST(ShmCollectivesTest, RankKilledMidShmAllReduceIsNamedBySurvivors) {
  KillMidAllReduce(Algorithm::kShm, 0, 2);
}

TEST(ShmCollectivesTest, RankKilledMidHierarchicalAllReduceIsNamedBySurvivors) {
  KillMidAllReduce(Algorithm::kHierarchical, 2, 2);
}

}  // namespace
}  // namespace herd::collectives
