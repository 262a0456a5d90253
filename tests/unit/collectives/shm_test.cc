// The shared-memory (shm) and hierarchical (hier) collectives over threads as ranks: a loopback
// fabric whose ranks carry host labels, so that the ranks of one label share a real segment in
// /dev/shm and talk to the other hosts over the fabric. Stages are lowered to 4 KiB (two per
// lane, three lanes) so that short vectors already take many pipeline steps and reuse every
// stage; results are compared bit for bit with the local reference (integer inputs).

#include <stdlib.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "algorithms/collectives/decision_table.h"
#include "algorithms/collectives/run.h"
#include "algorithms/collectives/topology.h"
#include "tests/unit/collectives/collective_test_util.h"

namespace herd::collectives::testing {
namespace {

using ::testing::HasSubstr;
using transport::Communicator;
using transport::LoopbackFabric;

// Small stages for every segment a test of this file makes.
class ShmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("HERD_SHM_STAGE_BYTES", "4096", 1);
    ::setenv("HERD_SHM_STAGES", "2", 1);
    ::setenv("HERD_SHM_LANES", "3", 1);
  }
  void TearDown() override {
    ::unsetenv("HERD_SHM_STAGE_BYTES");
    ::unsetenv("HERD_SHM_STAGES");
    ::unsetenv("HERD_SHM_LANES");
  }
};

// Host labels: rank r on host r * H / P (hosts of consecutive ranks).
std::vector<std::string> Blocked(int P, int H) {
  std::vector<std::string> hosts;
  for (int r = 0; r < P; ++r) hosts.push_back(absl::StrFormat("host-%d", r * H / P));
  return hosts;
}
// Rank r on host r % H: a rail's ranks are consecutive, a host's are not.
std::vector<std::string> RoundRobin(int P, int H) {
  std::vector<std::string> hosts;
  for (int r = 0; r < P; ++r) hosts.push_back(absl::StrFormat("host-%d", r % H));
  return hosts;
}
// Hosts of the given sizes, consecutive ranks.
std::vector<std::string> Sizes(const std::vector<int>& sizes) {
  std::vector<std::string> hosts;
  for (size_t h = 0; h < sizes.size(); ++h) {
    for (int k = 0; k < sizes[h]; ++k) hosts.push_back(absl::StrFormat("host-%d", h));
  }
  return hosts;
}

enum class ShmOp { kAllReduce, kReduceScatter, kAllGather, kBroadcast };
const char* OpName(ShmOp op) {
  switch (op) {
    case ShmOp::kAllReduce:
      return "all-reduce";
    case ShmOp::kReduceScatter:
      return "reduce-scatter";
    case ShmOp::kAllGather:
      return "all-gather";
    case ShmOp::kBroadcast:
      return "broadcast";
  }
  return "?";
}

struct Case {
  ShmOp op = ShmOp::kAllReduce;
  size_t count = 0;
  DType dtype = DType::kFloat32;
  ReduceOp reduce = ReduceOp::kSum;
  int root = 0;
  size_t direct_bytes = size_t{16} << 10;
  std::string Name(int P) const {
    return absl::StrFormat("%s %s root=%d", OpName(op), CaseName(P, count, dtype, reduce), root);
  }
};

// Runs `c` with `algorithm` on this rank and checks its result; DATA_LOSS names a wrong element.
absl::Status RunAndCheck(Communicator& comm, Algorithm algorithm, const Case& c) {
  const int P = comm.size(), r = comm.rank();
  const size_t es = DTypeSize(c.dtype);
  Buffer data, want;
  size_t first = 0, n = c.count;
  absl::Status st;
  auto common = [&](auto& o) {
    o.comm = &comm;
    o.dtype = c.dtype;
    o.tag = 5;
    o.timeout = kTimeout;
    o.count = c.count;
  };
  switch (c.op) {
    case ShmOp::kAllReduce: {
      data = Input(c.dtype, c.count, r);
      want = Reference(c.dtype, c.reduce, P, c.count);
      AllReduceOptions o;
      common(o);
      o.data = data.data();
      o.op = c.reduce;
      o.shm_direct_bytes = c.direct_bytes;
      st = AllReduce(o, algorithm);
      break;
    }
    case ShmOp::kReduceScatter: {
      data = Input(c.dtype, c.count, r);
      want = Reference(c.dtype, c.reduce, P, c.count);
      ReduceScatterOptions o;
      common(o);
      o.data = data.data();
      o.op = c.reduce;
      o.segment_bytes = 64;  // the hierarchical rail's ring: many segments
      st = ReduceScatter(o, algorithm);
      first = ChunkBegin(c.count, P, r);
      n = ChunkSize(c.count, P, r);
      break;
    }
    case ShmOp::kAllGather: {
      // Chunk q of the gathered vector is rank q's input there; the rest starts as the sentinel.
      want = Buffer(c.count * es);
      data = Filled(c.dtype, c.count, kSentinel);
      for (int q = 0; q < P; ++q) {
        const Buffer in = Input(c.dtype, c.count, q);
        const size_t b = ChunkBegin(c.count, P, q) * es, len = ChunkSize(c.count, P, q) * es;
        std::memcpy(want.data() + b, in.data() + b, len);
        if (q == r) std::memcpy(data.data() + b, in.data() + b, len);
      }
      AllGatherOptions o;
      common(o);
      o.data = data.data();
      o.segment_bytes = 64;
      st = AllGather(o, algorithm);
      break;
    }
    case ShmOp::kBroadcast: {
      data = r == c.root ? Input(c.dtype, c.count, c.root) : Filled(c.dtype, c.count, kSentinel);
      want = Input(c.dtype, c.count, c.root);
      BroadcastOptions o;
      common(o);
      o.data = data.data();
      o.root = c.root;
      st = Broadcast(o, algorithm);
      break;
    }
  }
  if (!st.ok()) {
    return absl::Status(st.code(), absl::StrFormat("%s: %s", c.Name(P), st.message()));
  }
  ::testing::AssertionResult same = SameElements(c.dtype, data, want, first, n);
  if (!same) {
    return absl::DataLossError(absl::StrFormat("%s, rank %d: %s", c.Name(P), r, same.message()));
  }
  return absl::OkStatus();
}

// Every rank runs every case, in order, on one communicator (lanes and stages reused throughout).
void RunCases(const std::vector<std::string>& hosts, Algorithm algorithm,
              const std::vector<Case>& cases) {
  auto statuses = RunRanksOnHosts(hosts, [&](Communicator& comm, LoopbackFabric&) {
    for (const Case& c : cases) HERD_RETURN_IF_ERROR(RunAndCheck(comm, algorithm, c));
    return absl::OkStatus();
  });
  ASSERT_TRUE(FirstError(statuses).ok()) << FirstError(statuses);
}

std::vector<ReduceOp> OpsFor(DType dtype) {
  if (IsFloating(dtype)) return {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMax};
  return {ReduceOp::kSum, ReduceOp::kMin};
}

constexpr DType kDTypes[] = {DType::kFloat32,  DType::kFloat64, DType::kFloat16,
                             DType::kBFloat16, DType::kInt32,   DType::kInt64};

std::vector<size_t> Counts(int P) {
  std::vector<size_t> counts = SmallCounts(P);
  counts.push_back(kMidCount);  // 4 KiB stages: tens of steps
  counts.push_back(100003);
  return counts;
}

// --- One host: every P in 1..9, every dtype, counts, ops, roots.

class ShmSweep : public ShmTest, public ::testing::WithParamInterface<int> {};

TEST_P(ShmSweep, EveryOperationMatchesTheReference) {
  const int P = GetParam();
  std::vector<Case> cases;
  for (DType dtype : kDTypes) {
    for (size_t count : Counts(P)) {
      for (ReduceOp reduce : OpsFor(dtype)) {
        // Direct (every rank reduces all) up to 16 KiB, and partitioned at every count.
        cases.push_back({ShmOp::kAllReduce, count, dtype, reduce});
        cases.push_back({ShmOp::kAllReduce, count, dtype, reduce, 0, 0});
        cases.push_back({ShmOp::kReduceScatter, count, dtype, reduce});
      }
      cases.push_back({ShmOp::kAllGather, count, dtype});
      for (int root : {0, P - 1, P / 2})
        cases.push_back({ShmOp::kBroadcast, count, dtype, {}, root});
    }
  }
  RunCases(Blocked(P, 1), Algorithm::kShm, cases);
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmSweep, ::testing::Range(1, 10),
                         [](const auto& info) { return absl::StrFormat("P%d", info.param); });

// --- Several hosts: every P in 2..9 on uniform layouts (blocked and round-robin) and uneven
// ones.

struct Layout {
  std::string name;
  std::vector<std::string> hosts;
  bool uniform;
};

std::vector<Layout> LayoutsFor(int P) {
  std::vector<Layout> out;
  for (int H = 2; H <= P; ++H) {
    if (P % H != 0) continue;
    out.push_back({absl::StrFormat("blocked%dx%d", H, P / H), Blocked(P, H), true});
    if (P / H > 1 && H > 1) {
      out.push_back({absl::StrFormat("roundrobin%dx%d", H, P / H), RoundRobin(P, H), true});
    }
  }
  if (P >= 3) {
    // Uneven: one host of one rank beside hosts of two or three.
    std::vector<int> sizes;
    for (int left = P; left > 0;) {
      const int s = left == P ? std::min(3, left) : std::min(2, left);
      sizes.push_back(s);
      left -= s;
    }
    if (std::adjacent_find(sizes.begin(), sizes.end(), std::not_equal_to<>()) != sizes.end()) {
      out.push_back({"uneven", Sizes(sizes), false});
    }
  }
  return out;
}

class HierSweep : public ShmTest, public ::testing::WithParamInterface<int> {};

TEST_P(HierSweep, EveryOperationMatchesTheReferenceOnEveryLayout) {
  const int P = GetParam();
  for (const Layout& layout : LayoutsFor(P)) {
    SCOPED_TRACE(layout.name);
    std::vector<Case> cases;
    for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kBFloat16, DType::kInt32}) {
      for (size_t count : {size_t{0}, size_t{1}, size_t(P - 1), size_t(P + 1), kMidCount}) {
        for (ReduceOp reduce : OpsFor(dtype)) {
          cases.push_back({ShmOp::kAllReduce, count, dtype, reduce});
          if (layout.uniform) cases.push_back({ShmOp::kReduceScatter, count, dtype, reduce});
        }
        if (layout.uniform) cases.push_back({ShmOp::kAllGather, count, dtype});
        for (int root : {0, P - 1, P / 2}) {
          cases.push_back({ShmOp::kBroadcast, count, dtype, {}, root});
        }
      }
    }
    RunCases(layout.hosts, Algorithm::kHierarchical, cases);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, HierSweep, ::testing::Range(2, 10),
                         [](const auto& info) { return absl::StrFormat("P%d", info.param); });

// --- auto on labelled fabrics: the table's picks, shm and hier among them, are correct.

TEST_F(ShmTest, AutoPicksRunOnEveryLayout) {
  for (const auto& hosts :
       {Blocked(4, 1), Blocked(4, 2), RoundRobin(6, 2), Sizes({3, 2}), Blocked(8, 4)}) {
    const int P = static_cast<int>(hosts.size());
    std::vector<Case> cases;
    for (size_t bytes : {size_t{4}, size_t{4096}, size_t{65536}, size_t{1} << 20}) {
      cases.push_back({ShmOp::kAllReduce, bytes / 4, DType::kFloat32, ReduceOp::kAverage});
      cases.push_back({ShmOp::kReduceScatter, bytes / 4, DType::kFloat32, ReduceOp::kSum});
      cases.push_back({ShmOp::kAllGather, bytes / 4, DType::kFloat32});
      cases.push_back({ShmOp::kBroadcast, bytes / 4, DType::kFloat32, {}, P - 1});
    }
    RunCases(hosts, Algorithm::kAuto, cases);
  }
}

TEST_F(ShmTest, TopologyIsLearnedOnTheCommunicator) {
  const std::vector<std::string> hosts = RoundRobin(6, 3);
  auto statuses = RunRanksOnHosts(hosts, [](Communicator& comm, LoopbackFabric&) -> absl::Status {
    HERD_ASSIGN_OR_RETURN(Topology * t, TopologyOf(comm, Deadline::After(kTimeout)));
    const HostLayout& l = t->layout();
    if (l.hosts != 3 || l.per_host != 2 || l.host != comm.rank() % 3 ||
        l.local != comm.rank() / 3 || !t->shm_ok() || t->domain() == nullptr ||
        t->rail() == nullptr || t->rail()->size() != 3 || t->rail()->rank() != l.host) {
      return absl::InternalError(absl::StrFormat("rank %d: %s, local %d of host %d", comm.rank(),
                                                 l.Describe(), l.local, l.host));
    }
    // The same object on the next call: learned once.
    HERD_ASSIGN_OR_RETURN(Topology * again, TopologyOf(comm, Deadline::After(kTimeout)));
    return again == t ? absl::OkStatus() : absl::InternalError("discovered twice");
  });
  ASSERT_TRUE(FirstError(statuses).ok()) << FirstError(statuses);
}

// --- Concurrency: DeAR's two threads per rank (reduce-scatter of one bucket while all-gather
// of another), with one lane (every operation waits for the one before) and with three.

void RunConcurrentHalves(const std::vector<std::string>& hosts, Algorithm algorithm) {
  constexpr int kBuckets = 12;
  auto statuses = RunRanksOnHosts(hosts, [&](Communicator& comm, LoopbackFabric&) {
    absl::Status rs_status, ag_status;
    std::thread rs([&] {
      for (int b = 0; b < kBuckets && rs_status.ok(); ++b) {
        Case c{ShmOp::kReduceScatter, size_t(1000 + 97 * b), DType::kFloat32, ReduceOp::kSum};
        rs_status = RunAndCheck(comm, algorithm, c);
      }
    });
    std::thread ag([&] {
      for (int b = 0; b < kBuckets && ag_status.ok(); ++b) {
        Case c{ShmOp::kAllGather, size_t(5000 - 131 * b), DType::kFloat32};
        ag_status = RunAndCheck(comm, algorithm, c);
      }
    });
    rs.join();
    ag.join();
    return rs_status.ok() ? ag_status : rs_status;
  });
  ASSERT_TRUE(FirstError(statuses).ok()) << FirstError(statuses);
}

TEST_F(ShmTest, ReduceScatterAndAllGatherThreadsRunAtOnce) {
  RunConcurrentHalves(Blocked(4, 1), Algorithm::kShm);
  RunConcurrentHalves(Blocked(6, 3), Algorithm::kHierarchical);
  ::setenv("HERD_SHM_LANES", "1", 1);
  RunConcurrentHalves(Blocked(4, 1), Algorithm::kShm);
  RunConcurrentHalves(RoundRobin(4, 2), Algorithm::kHierarchical);
}

// --- Failures.

TEST_F(ShmTest, AKilledRankIsNamedByEverySurvivor) {
  for (const auto& [hosts, algorithm] : std::vector<std::pair<std::vector<std::string>, Algorithm>>{
           {Blocked(4, 1), Algorithm::kShm}, {Blocked(6, 3), Algorithm::kHierarchical}}) {
    const int P = static_cast<int>(hosts.size()), victim = 1;
    auto statuses = RunRanksOnHosts(hosts, [&](Communicator& comm, LoopbackFabric& fabric) {
      // Warm up (the topology and the segment), then the victim dies instead of calling.
      HERD_RETURN_IF_ERROR(
          RunAndCheck(comm, algorithm, {ShmOp::kAllReduce, 20000, DType::kFloat32}));
      if (comm.rank() == victim) {
        fabric.kill(victim, absl::UnavailableError("killed by the test"));
        return absl::OkStatus();
      }
      return RunAndCheck(comm, algorithm, {ShmOp::kAllReduce, 20000, DType::kFloat32});
    });
    for (int q = 0; q < P; ++q) {
      if (q == victim) continue;
      EXPECT_EQ(statuses[q].code(), absl::StatusCode::kUnavailable) << q << ": " << statuses[q];
      EXPECT_THAT(std::string(statuses[q].message()), HasSubstr("rank 1")) << q;
    }
  }
}

TEST_F(ShmTest, RanksDisagreeingOnTheCountFail) {
  auto statuses = RunRanksOnHosts(Blocked(3, 1), [](Communicator& comm, LoopbackFabric&) {
    std::vector<float> data(comm.rank() == 2 ? 500 : 400, 1.0f);
    AllReduceOptions o;
    o.comm = &comm;
    o.data = data.data();
    o.count = data.size();
    o.timeout = std::chrono::seconds(10);
    return ShmAllReduce(o);
  });
  for (const absl::Status& st : statuses) EXPECT_FALSE(st.ok());
  EXPECT_TRUE(std::any_of(statuses.begin(), statuses.end(), [](const absl::Status& s) {
    return s.code() == absl::StatusCode::kInvalidArgument &&
           std::string(s.message()).find("another count") != std::string::npos;
  })) << FirstError(statuses);
}

TEST_F(ShmTest, WrongLayoutsAreRefused) {
  auto statuses = RunRanksOnHosts(Sizes({2, 1}), [](Communicator& comm, LoopbackFabric&) {
    std::vector<float> data(30, 1.0f);
    ReduceScatterOptions rs;
    rs.comm = &comm;
    rs.data = data.data();
    rs.count = data.size();
    absl::Status shm = ShmReduceScatter(rs);
    if (shm.code() != absl::StatusCode::kFailedPrecondition ||
        std::string(shm.message()).find("one host") == std::string::npos) {
      return absl::InternalError("shm on two hosts: " + shm.ToString());
    }
    absl::Status hier = HierarchicalReduceScatter(rs);
    if (hier.code() != absl::StatusCode::kFailedPrecondition ||
        std::string(hier.message()).find("as many ranks") == std::string::npos) {
      return absl::InternalError("hier on uneven hosts: " + hier.ToString());
    }
    // Bad options: INVALID_ARGUMENT before anything else.
    rs.tag = 1u << 21;
    absl::Status bad = ShmReduceScatter(rs);
    if (bad.code() != absl::StatusCode::kInvalidArgument)
      return absl::InternalError(bad.ToString());
    return comm.status();  // nothing above aborted the communicator
  });
  ASSERT_TRUE(FirstError(statuses).ok()) << FirstError(statuses);
}

// --- The decision table's host layouts.

TEST(ShmTableTest, HostsAndFallbacksParseAndChoose) {
  auto table = DecisionTable::Parse(R"(
allreduce 4 4 65536 oneshot          # five fields: one host
allreduce 4 4 inf shm,ring
allreduce 4 2 4 inf hier,rh
reduce_scatter 8 4 4 inf hier
)",
                                    "test");
  ASSERT_TRUE(table.ok()) << table.status();
  using L = LayoutTraits;
  const size_t big = size_t{64} << 20;
  // One host with segments: shm; without: the fallback.
  EXPECT_EQ(table->Choose(CollectiveOp::kAllReduce, 4, big, L{4, 1, true, true}), Algorithm::kShm);
  EXPECT_EQ(table->Choose(CollectiveOp::kAllReduce, 4, big, L{4, 1, false, true}),
            Algorithm::kRing);
  EXPECT_EQ(table->Choose(CollectiveOp::kAllReduce, 4, 100, L{4, 1, true, true}),
            Algorithm::kOneShot);
  // Several hosts take the several-host group, the nearest in ranks.
  EXPECT_EQ(table->Choose(CollectiveOp::kAllReduce, 4, big, L{8, 4, true, true}),
            Algorithm::kHierarchical);
  // One rank per host: hier cannot run; the fallback does.
  EXPECT_EQ(table->Choose(CollectiveOp::kAllReduce, 4, big, L{4, 4, true, true}),
            Algorithm::kRecursiveHalving);
  // Uneven hosts: reduce-scatter's hier cannot run, no fallback: the classic.
  EXPECT_EQ(table->Choose(CollectiveOp::kReduceScatter, 4, big, L{8, 3, true, false}),
            Algorithm::kRing);
  // What Format writes, Parse reads back.
  auto again = DecisionTable::Parse(table->Format(), "formatted");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->Format(), table->Format());

  for (const char* bad : {"allreduce 4 5 4 inf ring",      // more hosts than ranks
                          "allreduce 4 1 4 inf ring,shm",  // shm cannot be a fallback
                          "allreduce 4 1 4 inf ring,rh,rd", "reduce 4 1 4 inf shm"}) {
    EXPECT_EQ(DecisionTable::Parse(bad, "bad").status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

}  // namespace
}  // namespace herd::collectives::testing
