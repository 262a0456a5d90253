// Failures and concurrency: a rank crashing in the middle of a collective, a rank that never
// shows up, ranks that disagree on the count, and several collectives of different kinds and
// buckets running at once on one communicator.

#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "algorithms/collectives/alltoall.h"
#include "algorithms/collectives/run.h"
#include "tests/unit/collectives/collective_test_util.h"
#include "tests/unit/collectives/forwarding_communicator.h"

namespace herd::collectives::testing {
namespace {

using ::testing::HasSubstr;
using transport::Communicator;
using transport::LoopbackFabric;
using namespace std::chrono_literals;

constexpr std::chrono::milliseconds kShortTimeout = 1000ms;
// Thread start-up and teardown on 2 shared cores, beyond the collective's own deadline.
constexpr std::chrono::milliseconds kSlack = 5000ms;

// One operation on one rank's own buffers, with kShortTimeout.
using Op = std::function<absl::Status(Communicator&)>;

struct KillCase {
  const char* name;
  int size;
  int victim;
  int kill_at_send;  // the victim dies as it posts its n-th send
  Op op;
  // The survivors whose result depends on the victim; empty: all of them. (In a broadcast or a
  // reduce, a rank whose part is done before the victim dies may well succeed.)
  std::vector<int> must_fail = {};
};

Op RingAllReduceOp(size_t count, size_t segment,
                   std::chrono::milliseconds timeout = kShortTimeout) {
  return [=](Communicator& comm) {
    std::vector<float> data(count, 1.0f);
    AllReduceOptions o;
    o.comm = &comm;
    o.data = data.data();
    o.count = count;
    o.segment_bytes = segment;
    o.timeout = timeout;
    return RingAllReduce(o);
  };
}

std::vector<KillCase> KillCases() {
  auto reduce_scatter = [](Communicator& comm) {
    std::vector<double> data(50000, 2.0);
    ReduceScatterOptions o;
    o.comm = &comm;
    o.dtype = DType::kFloat64;
    o.data = data.data();
    o.count = data.size();
    o.segment_bytes = 512;
    o.timeout = kShortTimeout;
    return RingReduceScatter(o);
  };
  auto lp_allreduce = [](Communicator& comm) {
    std::vector<float> data(20000, 1.0f);
    AllReduceOptions o;
    o.comm = &comm;
    o.data = data.data();
    o.count = data.size();
    o.block_bytes = 256;
    o.timeout = kShortTimeout;
    return LinearPipelineAllReduce(o);
  };
  auto broadcast = [](Algorithm a) {
    return [a](Communicator& comm) {
      std::vector<float> data(20000, 1.0f);
      BroadcastOptions o;
      o.comm = &comm;
      o.data = data.data();
      o.count = data.size();
      o.block_bytes = 256;
      o.timeout = kShortTimeout;
      return Broadcast(o, a);
    };
  };
  auto tree_reduce = [](Communicator& comm) {
    std::vector<float> data(1000, 1.0f);
    ReduceOptions o;
    o.comm = &comm;
    o.data = data.data();
    o.count = data.size();
    o.timeout = kShortTimeout;
    return BinomialReduce(o);
  };
  auto allgather = [](Algorithm a) {
    return [a](Communicator& comm) {
      std::vector<float> data(6000, 1.0f);
      AllGatherOptions o;
      o.comm = &comm;
      o.data = data.data();
      o.count = data.size();
      o.timeout = kShortTimeout;
      return AllGather(o, a);
    };
  };
  auto alltoall = [](Communicator& comm) {
    std::vector<float> in(4000, 1.0f), out(4000);
    AllToAllOptions o;
    o.comm = &comm;
    o.input = in.data();
    o.output = out.data();
    o.count = in.size();
    o.timeout = kShortTimeout;
    return PairwiseAllToAll(o);
  };
  auto allreduce = [](Algorithm a) {
    return [a](Communicator& comm) {
      std::vector<float> data(3000, 1.0f);
      AllReduceOptions o;
      o.comm = &comm;
      o.data = data.data();
      o.count = data.size();
      o.timeout = kShortTimeout;
      return AllReduce(o, a);
    };
  };
  auto reduce_scatter_by = [](Algorithm a) {
    return [a](Communicator& comm) {
      std::vector<float> data(3000, 1.0f);
      ReduceScatterOptions o;
      o.comm = &comm;
      o.data = data.data();
      o.count = data.size();
      o.timeout = kShortTimeout;
      return ReduceScatter(o, a);
    };
  };
  return {
      {"RingAllReduce", 4, 2, 20, RingAllReduceOp(100000, 1024)},
      // P = 5 and 6: a fold partner or an extra rank dies; every result needs every rank.
      {"RecursiveDoublingAllReduce", 5, 4, 1, allreduce(Algorithm::kRecursiveDoubling)},
      {"RecursiveHalvingAllReduce", 6, 1, 2, allreduce(Algorithm::kRecursiveHalving)},
      {"OneShotAllReduce", 4, 3, 1, allreduce(Algorithm::kOneShot)},
      {"RecursiveHalvingReduceScatter", 5, 0, 1, reduce_scatter_by(Algorithm::kRecursiveHalving)},
      {"OneShotReduceScatter", 4, 1, 1, reduce_scatter_by(Algorithm::kOneShot)},
      {"OneShotAllGather", 4, 2, 1, allgather(Algorithm::kOneShot)},
      {"RingReduceScatter", 5, 0, 5, reduce_scatter},
      {"LinearPipelineAllReduce", 4, 1, 10, lp_allreduce},
      // Chain 0 -> 1 -> 2 -> 3: rank 3 depends on the victim.
      {"LinearPipelineBroadcast", 4, 2, 3, broadcast(Algorithm::kLinearPipeline), {3}},
      // Rank 4's subtree is 5, 6, 7.
      {"BinomialBroadcast", 8, 4, 1, broadcast(Algorithm::kBinomialTree), {5, 6, 7}},
      // Root 0 needs rank 1's contribution.
      {"BinomialReduce", 6, 1, 1, tree_reduce, {0}},
      {"RecursiveDoublingAllGather", 6, 5, 1, allgather(Algorithm::kRecursiveDoubling)},
      {"BruckAllGather", 5, 3, 1, allgather(Algorithm::kBruck)},
      {"PairwiseAllToAll", 4, 1, 2, alltoall},
  };
}

class KillTest : public ::testing::TestWithParam<int> {};

// Every surviving rank that depends on the victim returns an error within the deadline (no
// hang); in the all-to-all operations that is every survivor. The ranks that exchange
// messages with the victim report it as UNAVAILABLE naming it; a rank that only waits for
// another survivor learns of the death when that survivor's abort reaches it, and its error
// carries the survivor's, so every failing rank names the victim.
TEST_P(KillTest, SurvivorsFailWithinTheDeadline) {
  const KillCase c = KillCases()[GetParam()];
  SCOPED_TRACE(c.name);
  const auto start = Clock::now();
  auto statuses = RunRanks(c.size, [&](Communicator& comm, LoopbackFabric& fabric) {
    ForwardingCommunicator fc(comm);
    if (comm.rank() == c.victim) {
      fc.set_on_send([&](int n) {
        if (n == c.kill_at_send)
          fabric.kill(c.victim, absl::UnavailableError("killed by the test"));
      });
    }
    return c.op(fc);
  });
  const auto elapsed = Clock::now() - start;
  EXPECT_LT(elapsed, kShortTimeout + kSlack);
  const std::string victim = absl::StrFormat("rank %d", c.victim);
  int naming_victim = 0;
  for (int q = 0; q < c.size; ++q) {
    const absl::Status& s = statuses[q];
    const bool must_fail =
        c.must_fail.empty() || std::count(c.must_fail.begin(), c.must_fail.end(), q) > 0;
    if (must_fail) {
      EXPECT_FALSE(s.ok()) << "rank " << q << " returned OK";
    }
    if (q == c.victim || s.ok()) continue;
    EXPECT_THAT(std::string(s.message()), HasSubstr(victim)) << "rank " << q;
    ++naming_victim;
  }
  EXPECT_GE(naming_victim, 1) << "no survivor named " << victim;
}

INSTANTIATE_TEST_SUITE_P(Collectives, KillTest,
                         ::testing::Range(0, static_cast<int>(KillCases().size())),
                         [](const auto& info) { return KillCases()[info.param].name; });

TEST(FailureTest, AbsentRankMeansDeadlineExceededNamingAPeer) {
  const auto start = Clock::now();
  auto statuses = RunRanks(3, [&](Communicator& comm, LoopbackFabric&) -> absl::Status {
    if (comm.rank() == 2) return absl::OkStatus();  // never joins
    // Rank 1's deadline is later than rank 0's, so what rank 1 reports is rank 0's abort, not
    // its own deadline (with equal deadlines either may come first).
    return RingAllReduceOp(3000, 64, comm.rank() == 1 ? 3 * kShortTimeout : kShortTimeout)(comm);
  });
  EXPECT_LT(Clock::now() - start, kShortTimeout + kSlack);
  // Rank 0 receives from rank 2 in the ring and runs into its deadline; its abort reaches
  // rank 1, whose error carries rank 0's, so both name the absent rank.
  EXPECT_EQ(statuses[0].code(), absl::StatusCode::kDeadlineExceeded) << statuses[0];
  EXPECT_THAT(std::string(statuses[0].message()), HasSubstr("from rank 2"));
  EXPECT_FALSE(statuses[1].ok());
  EXPECT_THAT(std::string(statuses[1].message()), HasSubstr("from rank 2"));
}

TEST(FailureTest, RanksDisagreeingOnTheCountFail) {
  auto statuses = RunRanks(3, [&](Communicator& comm, LoopbackFabric&) {
    return RingAllReduceOp(comm.rank() == 1 ? 50 : 60, 64)(comm);
  });
  bool size_error = false;
  for (const absl::Status& s : statuses) {
    EXPECT_FALSE(s.ok());
    if (s.code() == absl::StatusCode::kInvalidArgument ||
        s.code() == absl::StatusCode::kOutOfRange) {
      size_error = true;
      EXPECT_THAT(std::string(s.message()), HasSubstr("rank"));
    }
  }
  EXPECT_TRUE(size_error) << FirstError(statuses);
}

// After a failure the communicator is aborted: a later collective fails at once with the same
// status instead of touching the transport.
TEST(FailureTest, FailedCollectiveLeavesTheCommunicatorAborted) {
  auto statuses = RunRanks(2, [&](Communicator& comm, LoopbackFabric&) -> absl::Status {
    if (comm.rank() == 1) return absl::OkStatus();
    absl::Status first = RingAllReduceOp(100, 64)(comm);
    if (first.code() != absl::StatusCode::kDeadlineExceeded) return first;
    absl::Status second = RingAllReduceOp(100, 64)(comm);
    if (second != first) {
      return absl::InternalError(absl::StrFormat("second: %s", second.ToString()));
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(statuses[0].ok()) << statuses[0];
}

// DeAR overlaps the reduce-scatter of one bucket with the all-gather of another on the same
// communicator; the operation kinds in the tags also keep one bucket's RS and AG apart.
TEST(ConcurrencyTest, ReduceScatterAndAllGatherRunAtOnce) {
  const int P = 4;
  const size_t count = 5003;
  for (uint32_t ag_tag : {2u, 1u}) {
    SCOPED_TRACE(absl::StrFormat("RS bucket 1, AG bucket %u", ag_tag));
    const Buffer reduced = Reference(DType::kFloat32, ReduceOp::kSum, P, count);
    const Buffer gathered = Input(DType::kFloat32, count, 0);  // every rank holds the same
    std::vector<Buffer> rs_bufs(P), ag_bufs(P);
    for (int q = 0; q < P; ++q) {
      rs_bufs[q] = Input(DType::kFloat32, count, q);
      ag_bufs[q] = Filled(DType::kFloat32, count, kSentinel);
      size_t b = ChunkBegin(count, P, q) * 4, n = ChunkSize(count, P, q) * 4;
      std::copy(gathered.begin() + b, gathered.begin() + b + n, ag_bufs[q].begin() + b);
    }
    auto statuses = RunRanks(P, [&](Communicator& comm, LoopbackFabric&) {
      const int r = comm.rank();
      absl::Status rs_status;
      std::thread rs_thread([&] {
        ReduceScatterOptions o;
        o.comm = &comm;
        o.data = rs_bufs[r].data();
        o.count = count;
        o.tag = 1;
        o.segment_bytes = 64;
        o.timeout = kTimeout;
        rs_status = RingReduceScatter(o);
      });
      AllGatherOptions o;
      o.comm = &comm;
      o.data = ag_bufs[r].data();
      o.count = count;
      o.tag = ag_tag;
      o.segment_bytes = 64;
      o.timeout = kTimeout;
      absl::Status ag_status = RingAllGather(o);
      rs_thread.join();
      return rs_status.ok() ? ag_status : rs_status;
    });
    ASSERT_TRUE(FirstError(statuses).ok()) << FirstError(statuses);
    for (int q = 0; q < P; ++q) {
      EXPECT_TRUE(SameElements(DType::kFloat32, rs_bufs[q], reduced, ChunkBegin(count, P, q),
                               ChunkSize(count, P, q)));
      EXPECT_TRUE(SameElements(DType::kFloat32, ag_bufs[q], gathered, 0, count));
    }
  }
}

// One bucket id, every operation kind at once on each rank's communicator.
TEST(ConcurrencyTest, EveryKindOnOneBucketAtOnce) {
  const int P = 5, root = 2;
  const size_t count = 2001;
  const uint32_t tag = 3;
  const Buffer reduced = Reference(DType::kFloat32, ReduceOp::kSum, P, count);
  struct Rank {
    Buffer allreduce, bcast, reduce, a2a_in, a2a_out;
  };
  std::vector<Rank> ranks(P);
  for (int q = 0; q < P; ++q) {
    ranks[q].allreduce = Input(DType::kFloat32, count, q);
    ranks[q].bcast =
        q == root ? Input(DType::kFloat32, count, root) : Filled(DType::kFloat32, count, kSentinel);
    ranks[q].reduce = Input(DType::kFloat32, count, q);
    ranks[q].a2a_in = Input(DType::kFloat32, count, q);
    ranks[q].a2a_out = Filled(DType::kFloat32, ChunkSize(count, P, q) * P, kSentinel);
  }
  auto statuses = RunRanks(P, [&](Communicator& comm, LoopbackFabric&) {
    Rank& mine = ranks[comm.rank()];
    std::vector<std::function<absl::Status()>> ops = {
        [&] {
          AllReduceOptions o;
          o.comm = &comm;
          o.data = mine.allreduce.data();
          o.count = count;
          o.tag = tag;
          o.segment_bytes = 64;
          o.timeout = kTimeout;
          return RingAllReduce(o);
        },
        [&] {
          BroadcastOptions o;
          o.comm = &comm;
          o.data = mine.bcast.data();
          o.count = count;
          o.root = root;
          o.tag = tag;
          o.block_bytes = 128;
          o.timeout = kTimeout;
          return LinearPipelineBroadcast(o);
        },
        [&] {
          ReduceOptions o;
          o.comm = &comm;
          o.data = mine.reduce.data();
          o.count = count;
          o.root = root;
          o.tag = tag;
          o.block_bytes = 128;
          o.timeout = kTimeout;
          return LinearPipelineReduce(o);
        },
        [&] {
          AllToAllOptions o;
          o.comm = &comm;
          o.input = mine.a2a_in.data();
          o.output = mine.a2a_out.data();
          o.count = count;
          o.tag = tag;
          o.timeout = kTimeout;
          return PairwiseAllToAll(o);
        },
    };
    std::vector<absl::Status> results(ops.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < ops.size(); ++i) threads.emplace_back([&, i] { results[i] = ops[i](); });
    for (auto& t : threads) t.join();
    return FirstError(results);
  });
  ASSERT_TRUE(FirstError(statuses).ok()) << FirstError(statuses);
  const Buffer bcast = Input(DType::kFloat32, count, root);
  for (int q = 0; q < P; ++q) {
    EXPECT_TRUE(SameElements(DType::kFloat32, ranks[q].allreduce, reduced, 0, count));
    EXPECT_TRUE(SameElements(DType::kFloat32, ranks[q].bcast, bcast, 0, count));
    const size_t block = ChunkSize(count, P, q), first = ChunkBegin(count, P, q);
    Buffer want = Encode(DType::kFloat32, block * P,
                         [&](size_t e) { return InputValue(int(e / block), first + e % block); });
    EXPECT_TRUE(SameElements(DType::kFloat32, ranks[q].a2a_out, want, 0, block * P));
  }
  EXPECT_TRUE(SameElements(DType::kFloat32, ranks[root].reduce, reduced, 0, count));
}

}  // namespace
}  // namespace herd::collectives::testing
