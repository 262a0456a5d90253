// The small-message algorithms (recursive-halving and one-shot reduce-scatter; the all-reduces
// on non-integer inputs) and Algorithm::kAuto: the decision table's parsing and lookup, and
// that whatever auto picks, at every size on either side of every bound of the compiled-in
// table and of a table that picks every algorithm in turn, gives the right result for every
// operation and rank count. (Correctness only: which pick is fastest is the benchmark's job.)

#include <random>
#include <set>
#include <tuple>

#include <gtest/gtest.h>

#include "algorithms/collectives/decision_table.h"
#include "algorithms/collectives/run.h"
#include "tests/unit/collectives/collective_test_util.h"

namespace herd::collectives::testing {
namespace {

using transport::Communicator;
using transport::LoopbackFabric;

Buffer Gathered(DType dtype, size_t count, int P) {
  std::vector<int> owner(count);
  for (int c = 0; c < P; ++c) {
    for (size_t i = ChunkBegin(count, P, c); i < ChunkBegin(count, P, c + 1); ++i) owner[i] = c;
  }
  return Encode(dtype, count, [&](size_t i) { return InputValue(owner[i], i); });
}

void CheckReduceScatter(Algorithm algorithm, int P, size_t count, DType dtype, ReduceOp op) {
  SCOPED_TRACE(CaseName(P, count, dtype, op));
  SCOPED_TRACE(AlgorithmName(algorithm));
  const Buffer want = Reference(dtype, op, P, count);
  std::vector<Buffer> bufs(P);
  for (int q = 0; q < P; ++q) bufs[q] = Input(dtype, count, q);
  auto statuses = RunRanks(P, [&](Communicator& comm, LoopbackFabric&) {
    ReduceScatterOptions o;
    o.comm = &comm;
    o.dtype = dtype;
    o.data = bufs[comm.rank()].data();
    o.count = count;
    o.op = op;
    o.tag = 5;
    o.timeout = kTimeout;
    return ReduceScatter(o, algorithm);
  });
  ASSERT_TRUE(FirstError(statuses).ok()) << FirstError(statuses);
  for (int q = 0; q < P; ++q) {
    EXPECT_TRUE(SameElements(dtype, bufs[q], want, ChunkBegin(count, P, q), ChunkSize(count, P, q)))
        << "rank " << q;
  }
}

void CheckAllReduce(Algorithm algorithm, int P, size_t count, DType dtype, ReduceOp op) {
  SCOPED_TRACE(CaseName(P, count, dtype, op));
  SCOPED_TRACE(AlgorithmName(algorithm));
  const Buffer want = Reference(dtype, op, P, count);
  std::vector<Buffer> bufs(P);
  for (int q = 0; q < P; ++q) bufs[q] = Input(dtype, count, q);
  auto statuses = RunRanks(P, [&](Communicator& comm, LoopbackFabric&) {
    AllReduceOptions o;
    o.comm = &comm;
    o.dtype = dtype;
    o.data = bufs[comm.rank()].data();
    o.count = count;
    o.op = op;
    o.tag = 6;
    o.timeout = kTimeout;
    return AllReduce(o, algorithm);
  });
  ASSERT_TRUE(FirstError(statuses).ok()) << FirstError(statuses);
  for (int q = 0; q < P; ++q) {
    EXPECT_TRUE(SameElements(dtype, bufs[q], want, 0, count)) << "rank " << q;
  }
}

void CheckAllGather(Algorithm algorithm, int P, size_t count, DType dtype) {
  SCOPED_TRACE(CaseName(P, count, dtype, ReduceOp::kSum));
  SCOPED_TRACE(AlgorithmName(algorithm));
  const Buffer want = Gathered(dtype, count, P);
  const size_t es = DTypeSize(dtype);
  std::vector<Buffer> bufs(P);
  for (int q = 0; q < P; ++q) {
    bufs[q] = Filled(dtype, count, kSentinel);
    size_t b = ChunkBegin(count, P, q) * es, n = ChunkSize(count, P, q) * es;
    std::copy(want.begin() + b, want.begin() + b + n, bufs[q].begin() + b);
  }
  auto statuses = RunRanks(P, [&](Communicator& comm, LoopbackFabric&) {
    AllGatherOptions o;
    o.comm = &comm;
    o.dtype = dtype;
    o.data = bufs[comm.rank()].data();
    o.count = count;
    o.tag = 4;
    o.timeout = kTimeout;
    return AllGather(o, algorithm);
  });
  ASSERT_TRUE(FirstError(statuses).ok()) << FirstError(statuses);
  for (int q = 0; q < P; ++q) {
    EXPECT_TRUE(SameElements(dtype, bufs[q], want, 0, count)) << "rank " << q;
  }
}

// --- Reduce-scatter sweep: every (algorithm, P) one test over dtypes, counts, sum/avg.

class ReduceScatterSweep : public ::testing::TestWithParam<std::tuple<Algorithm, int>> {};

TEST_P(ReduceScatterSweep, MatchesReference) {
  auto [algorithm, P] = GetParam();
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    std::vector<size_t> counts = SmallCounts(P);
    counts.push_back(kMidCount);
    counts.push_back(kLargeCount);
    for (size_t count : counts) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        CheckReduceScatter(algorithm, P, count, dtype, op);
      }
    }
  }
  for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
    CheckReduceScatter(algorithm, P, P + 1, DType::kInt32, op);
  }
  CheckReduceScatter(algorithm, P, kMidCount, DType::kInt64, ReduceOp::kSum);
}

INSTANTIATE_TEST_SUITE_P(Collectives, ReduceScatterSweep,
                         ::testing::Combine(::testing::Values(Algorithm::kRecursiveHalving,
                                                              Algorithm::kOneShot,
                                                              Algorithm::kAuto),
                                            ::testing::Values(1, 2, 3, 4, 5, 6, 7, 8, 16)),
                         [](const auto& info) {
                           return absl::StrFormat("%s_P%d", AlgorithmName(std::get<0>(info.param)),
                                                  std::get<1>(info.param));
                         });

// Non-integer inputs: the order of the additions matters, so every rank must still hold the same
// bits (an all-reduce result is one value), within the ring's rounding bound P u sum|x|.
TEST(SmallMessageAllReduce, NonIntegerInputsSameBitsOnEveryRank) {
  for (Algorithm algorithm :
       {Algorithm::kRecursiveDoubling, Algorithm::kRecursiveHalving, Algorithm::kOneShot}) {
    for (int P : {3, 4, 7}) {
      for (auto [dtype, u] :
           {std::pair{DType::kFloat32, 0x1p-24}, std::pair{DType::kFloat16, 0x1p-11},
            std::pair{DType::kBFloat16, 0x1p-8}}) {
        SCOPED_TRACE(absl::StrFormat("%s P=%d %s", AlgorithmName(algorithm), P, DTypeName(dtype)));
        const size_t count = 1001;
        std::mt19937 rng(7);
        std::uniform_real_distribution<double> dist(-1.0, 1.0);
        std::vector<Buffer> bufs(P);
        std::vector<double> exact(count, 0.0), magnitude(count, 0.0);
        for (int q = 0; q < P; ++q) {
          bufs[q] = Encode(dtype, count, [&](size_t) { return dist(rng); });
          for (size_t i = 0; i < count; ++i) {
            const double x = Load(dtype, bufs[q].data(), i);
            exact[i] += x;
            magnitude[i] += std::abs(x);
          }
        }
        auto statuses = RunRanks(P, [&](Communicator& comm, LoopbackFabric&) {
          AllReduceOptions o;
          o.comm = &comm;
          o.dtype = dtype;
          o.data = bufs[comm.rank()].data();
          o.count = count;
          o.timeout = kTimeout;
          return AllReduce(o, algorithm);
        });
        ASSERT_TRUE(FirstError(statuses).ok()) << FirstError(statuses);
        for (int q = 0; q < P; ++q) {
          for (size_t i = 0; i < count; ++i) {
            const double got = Load(dtype, bufs[q].data(), i);
            ASSERT_LE(std::abs(got - exact[i]), P * u * magnitude[i]) << "rank " << q << " i " << i;
            ASSERT_EQ(got, Load(dtype, bufs[0].data(), i)) << "rank " << q << " i " << i;
          }
        }
      }
    }
  }
}

// --- The decision table.

TEST(DecisionTable, ParsesFormatsAndChooses) {
  auto table = DecisionTable::Parse(
      "# comment\n"
      "allreduce 4 4 4096 oneshot   # tiny\n"
      "allreduce 4 4 inf ring\n"
      "allreduce 4 4 65536 rd\n"
      "\n"
      "allreduce 8 4 inf rh\n"
      "allgather 2 2 100 bruck\n",
      "test");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->Choose(CollectiveOp::kAllReduce, 4, 1, 4), Algorithm::kOneShot);
  EXPECT_EQ(table->Choose(CollectiveOp::kAllReduce, 4, 4096, 4), Algorithm::kOneShot);
  EXPECT_EQ(table->Choose(CollectiveOp::kAllReduce, 4, 4097, 4), Algorithm::kRecursiveDoubling);
  EXPECT_EQ(table->Choose(CollectiveOp::kAllReduce, 4, 65537, 4), Algorithm::kRing);
  // The nearest rank count (the smaller on a tie: 6 is as near to 4 as to 8), the nearest
  // element size.
  EXPECT_EQ(table->Choose(CollectiveOp::kAllReduce, 4, 100, 5), Algorithm::kOneShot);
  EXPECT_EQ(table->Choose(CollectiveOp::kAllReduce, 4, 100, 6), Algorithm::kOneShot);
  EXPECT_EQ(table->Choose(CollectiveOp::kAllReduce, 8, 100, 16), Algorithm::kRecursiveHalving);
  EXPECT_EQ(table->Choose(CollectiveOp::kAllReduce, 2, 100, 4), Algorithm::kOneShot);
  // A group without an inf rule extends its last; an op without rules runs its classic one.
  EXPECT_EQ(table->Choose(CollectiveOp::kAllGather, 2, size_t{1} << 30, 2), Algorithm::kBruck);
  EXPECT_EQ(table->Choose(CollectiveOp::kReduceScatter, 4, 8, 4), Algorithm::kRing);
  EXPECT_EQ(table->Choose(CollectiveOp::kBroadcast, 4, 8, 4), Algorithm::kLinearPipeline);

  auto again = DecisionTable::Parse(table->Format(), "formatted");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << table->Format();
  EXPECT_EQ(again->Format(), table->Format());
  EXPECT_EQ(again->rules().size(), 5u);
}

TEST(DecisionTable, BadLinesNameTheLineAndWhy) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"allreduce 4 4 inf\n", "line 1: expected"},
      {"\nallreduc 4 4 inf ring\n", "line 2: unknown operation 'allreduc'"},
      {"allreduce 1 4 inf ring\n", "ranks must be an integer >= 2"},
      {"allreduce 4 3 inf ring\n", "dtype bytes must be 1, 2, 4 or 8"},
      {"allreduce 4 4 0 ring\n", "positive byte count or inf"},
      {"allreduce 4 4 inf rign\n", "unknown algorithm 'rign'"},
      {"reduce_scatter 4 4 inf bruck\n", "reduce_scatter has no algorithm 'bruck'"},
      {"allgather 4 4 inf auto\n", "allgather has no algorithm 'auto'"},
      {"allreduce 4 4 64 rd\nallreduce 4 4 64 ring\n", "line 2: a second rule"},
  };
  for (const auto& [text, want] : cases) {
    auto table = DecisionTable::Parse(text, "t.txt");
    ASSERT_FALSE(table.ok()) << text;
    EXPECT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(table.status().message()).find(want), std::string::npos)
        << table.status() << " (wanted: " << want << ")";
    EXPECT_NE(std::string(table.status().message()).find("t.txt"), std::string::npos);
  }
  auto missing = DecisionTable::Load("/nonexistent/table.txt");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

TEST(DecisionTable, MergeReplacesOnlyTheGroupsItBrings) {
  auto table = DecisionTable::Parse(
      "allreduce 4 4 4096 oneshot\nallreduce 4 4 inf ring\nallreduce 8 4 inf rh\n", "t");
  ASSERT_TRUE(table.ok());
  table->Merge(
      {DecisionRule{CollectiveOp::kAllReduce, 4, 4, kUnbounded, Algorithm::kRecursiveDoubling}});
  EXPECT_EQ(table->rules().size(), 2u);
  EXPECT_EQ(table->Choose(CollectiveOp::kAllReduce, 4, 1, 4), Algorithm::kRecursiveDoubling);
  EXPECT_EQ(table->Choose(CollectiveOp::kAllReduce, 4, 1, 8), Algorithm::kRecursiveHalving);
}

TEST(DecisionTable, CompiledInTableCoversTheMeasuredRankCounts) {
  const DecisionTable& table = DefaultDecisionTable();
  for (CollectiveOp op :
       {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter, CollectiveOp::kAllGather}) {
    for (int P : {2, 3, 4, 8}) {
      bool unbounded = false;
      for (const DecisionRule& r : table.rules()) {
        if (r.op == op && r.ranks == P && r.dtype_bytes == 4 && r.up_to_bytes == kUnbounded) {
          unbounded = true;
        }
      }
      EXPECT_TRUE(unbounded) << CollectiveOpName(op) << " P=" << P;
    }
  }
}

TEST(DecisionTable, AnExplicitTableWinsAndNullRestoresTheDefault) {
  // $HERD_COLLECTIVES_TABLE is read once per process (and unset in the tests): the explicit
  // table must win, and clearing it must give the compiled-in one back.
  auto table = DecisionTable::Parse("allreduce 2 4 inf oneshot\n", "t");
  ASSERT_TRUE(table.ok());
  SetActiveDecisionTable(std::make_shared<const DecisionTable>(*table));
  auto active = ActiveDecisionTable();
  ASSERT_TRUE(active.ok());
  EXPECT_EQ((*active)->Choose(CollectiveOp::kAllReduce, 4, 1 << 30, 2), Algorithm::kOneShot);
  SetActiveDecisionTable(nullptr);
  active = ActiveDecisionTable();
  ASSERT_TRUE(active.ok()) << active.status();
  EXPECT_EQ((*active)->Format(), DefaultDecisionTable().Format());
}

// --- Auto: correct results whatever it picks.

// Element counts on both sides of every bound of the table's groups for (op, P, 4-byte
// elements), plus the small counts; capped so that the sweep stays fast.
std::vector<size_t> CountsAroundBounds(const DecisionTable& table, CollectiveOp op, int P) {
  std::set<size_t> counts;
  for (size_t c : SmallCounts(P)) counts.insert(c);
  for (const DecisionRule& r : table.rules()) {
    if (r.op != op || r.dtype_bytes != 4 || r.up_to_bytes == kUnbounded) continue;
    const size_t at = r.up_to_bytes / 4;
    if (at > (size_t{4} << 20) / 4) continue;
    counts.insert(at);
    counts.insert(at + 1);
  }
  return {counts.begin(), counts.end()};
}

void CheckEveryOpAround(const DecisionTable& table, int P) {
  for (size_t count : CountsAroundBounds(table, CollectiveOp::kAllReduce, P)) {
    CheckAllReduce(Algorithm::kAuto, P, count, DType::kFloat32, ReduceOp::kAverage);
  }
  for (size_t count : CountsAroundBounds(table, CollectiveOp::kReduceScatter, P)) {
    CheckReduceScatter(Algorithm::kAuto, P, count, DType::kFloat32, ReduceOp::kSum);
  }
  for (size_t count : CountsAroundBounds(table, CollectiveOp::kAllGather, P)) {
    CheckAllGather(Algorithm::kAuto, P, count, DType::kFloat32);
  }
}

class AutoPicks : public ::testing::TestWithParam<int> {};

TEST_P(AutoPicks, CompiledInTableGivesCorrectResultsAtEveryBound) {
  SetActiveDecisionTable(nullptr);
  CheckEveryOpAround(DefaultDecisionTable(), GetParam());
}

// A table that switches algorithm every few hundred bytes, so that every algorithm of every
// operation is picked at some size, on both sides of each switch.
TEST_P(AutoPicks, EveryAlgorithmAutoCanPickGivesCorrectResults) {
  const int P = GetParam();
  std::vector<DecisionRule> rules;
  for (CollectiveOp op :
       {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter, CollectiveOp::kAllGather}) {
    size_t bound = 0;
    for (Algorithm a : HostAlgorithms(op)) {
      bound += 400;
      rules.push_back(DecisionRule{op, P, 4, bound, a});
    }
  }
  DecisionTable table;
  table.Merge(rules);
  SetActiveDecisionTable(std::make_shared<const DecisionTable>(table));
  CheckEveryOpAround(table, P);
  SetActiveDecisionTable(nullptr);
}

INSTANTIATE_TEST_SUITE_P(Collectives, AutoPicks, ::testing::Values(2, 3, 4, 5, 8),
                         [](const auto& info) { return absl::StrFormat("P%d", info.param); });

// Options are checked before the table is consulted, and the error names "auto". (A table
// whose pick an operation cannot run cannot be built: Parse refuses it, tested above.)
TEST(AutoPicks, BadOptionsAreInvalidArgumentNamingAuto) {
  AllReduceOptions o;
  o.count = 4;
  std::vector<float> data(4);
  o.data = data.data();
  const absl::Status st = AllReduce(o);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(st.message()).find("auto all-reduce"), std::string::npos) << st;
}

}  // namespace
}  // namespace herd::collectives::testing
