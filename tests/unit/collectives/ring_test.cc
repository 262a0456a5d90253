// Ring reduce-scatter, all-gather and all-reduce over threads-as-ranks.
//
// Coverage of the sweep P x count x dtype x op: every (P, dtype) is one test; inside it every
// count of {0, 1, P-1, P+1, 10007, 1000003} runs with sum and avg. Counts up to 10007 use
// 64-byte segments (many segments per chunk even for small vectors); 1000003 uses 64 KiB
// segments for the RS+AG pair and the default segment size for RingAllReduce.

#include <random>
#include <tuple>

#include <gtest/gtest.h>

#include "algorithms/collectives/allgather.h"
#include "algorithms/collectives/allreduce.h"
#include "algorithms/collectives/reduce_scatter.h"
#include "tests/unit/collectives/collective_test_util.h"

namespace herd::collectives::testing {
namespace {

using transport::Communicator;
using transport::LoopbackFabric;

constexpr size_t kTinySegment = 64;

// 1-byte segments (one element each) for the small counts, 64 bytes for 10007 elements, 64 KiB
// for 1000003 (0: the default, 1 MiB).
size_t SegmentFor(size_t count, bool default_for_large) {
  if (count == kLargeCount) return default_for_large ? 0 : size_t{64} << 10;
  return count == kMidCount ? kTinySegment : 1;
}

std::vector<size_t> SweepCounts(int P) {
  std::vector<size_t> counts = SmallCounts(P);
  counts.push_back(kMidCount);
  counts.push_back(kLargeCount);
  return counts;
}

// RS then AG on one buffer, the way DeAR runs them: checks chunk r after the RS, then the whole
// vector after the AG.
void CheckReduceScatterThenAllGather(int P, size_t count, DType dtype, ReduceOp op,
                                     size_t segment) {
  SCOPED_TRACE(CaseName(P, count, dtype, op));
  const Buffer want = Reference(dtype, op, P, count);
  std::vector<Buffer> bufs(P);
  std::vector<Buffer> own_after_rs(P);
  for (int q = 0; q < P; ++q) bufs[q] = Input(dtype, count, q);
  const size_t es = DTypeSize(dtype);
  auto statuses = RunRanks(P, [&](Communicator& comm, LoopbackFabric&) -> absl::Status {
    const int r = comm.rank();
    ReduceScatterOptions rs;
    rs.comm = &comm;
    rs.dtype = dtype;
    rs.data = bufs[r].data();
    rs.count = count;
    rs.op = op;
    rs.tag = 7;
    rs.timeout = kTimeout;
    rs.segment_bytes = segment;
    HERD_RETURN_IF_ERROR(RingReduceScatter(rs));
    // Snapshot chunk r before the all-gather overwrites the others' chunks.
    own_after_rs[r] = Filled(dtype, count, kSentinel);
    size_t b = ChunkBegin(count, P, r) * es, n = ChunkSize(count, P, r) * es;
    std::copy(bufs[r].begin() + b, bufs[r].begin() + b + n, own_after_rs[r].begin() + b);
    AllGatherOptions ag;
    ag.comm = &comm;
    ag.dtype = dtype;
    ag.data = bufs[r].data();
    ag.count = count;
    ag.tag = 7;
    ag.timeout = kTimeout;
    ag.segment_bytes = segment;
    return RingAllGather(ag);
  });
  ASSERT_TRUE(FirstError(statuses).ok()) << FirstError(statuses);
  for (int q = 0; q < P; ++q) {
    EXPECT_TRUE(
        SameElements(dtype, own_after_rs[q], want, ChunkBegin(count, P, q), ChunkSize(count, P, q)))
        << "reduce-scatter, rank " << q;
    EXPECT_TRUE(SameElements(dtype, bufs[q], want, 0, count)) << "all-gather, rank " << q;
  }
}

void CheckAllReduce(int P, size_t count, DType dtype, ReduceOp op, size_t segment) {
  SCOPED_TRACE(CaseName(P, count, dtype, op));
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
    o.tag = 3;
    o.timeout = kTimeout;
    if (segment > 0) o.segment_bytes = segment;
    return RingAllReduce(o);
  });
  ASSERT_TRUE(FirstError(statuses).ok()) << FirstError(statuses);
  for (int q = 0; q < P; ++q) {
    EXPECT_TRUE(SameElements(dtype, bufs[q], want, 0, count)) << "rank " << q;
  }
}

class RingSweep : public ::testing::TestWithParam<std::tuple<int, DType>> {};

TEST_P(RingSweep, ReduceScatterThenAllGather) {
  auto [P, dtype] = GetParam();
  for (size_t count : SweepCounts(P)) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      CheckReduceScatterThenAllGather(P, count, dtype, op, SegmentFor(count, false));
    }
  }
}

TEST_P(RingSweep, AllReduce) {
  auto [P, dtype] = GetParam();
  for (size_t count : SweepCounts(P)) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      CheckAllReduce(P, count, dtype, op, SegmentFor(count, true));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Collectives, RingSweep,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 7, 8, 16),
                                            ::testing::Values(DType::kFloat32, DType::kFloat64,
                                                              DType::kFloat16, DType::kBFloat16)),
                         [](const auto& info) {
                           return absl::StrFormat("P%d_%s", std::get<0>(info.param),
                                                  DTypeName(std::get<1>(info.param)));
                         });

TEST(RingTest, MinAndMax) {
  for (int P : {3, 5}) {
    for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                        DType::kInt32, DType::kInt64}) {
      for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
        CheckAllReduce(P, kMidCount, dtype, op, kTinySegment);
        CheckReduceScatterThenAllGather(P, P + 1, dtype, op, kTinySegment);
      }
    }
  }
}

TEST(RingTest, IntegerSumsAreExact) {
  for (int P : {4, 7}) {
    for (DType dtype : {DType::kInt32, DType::kInt64}) {
      CheckAllReduce(P, kMidCount, dtype, ReduceOp::kSum, kTinySegment);
      CheckReduceScatterThenAllGather(P, P - 1, dtype, ReduceOp::kSum, kTinySegment);
    }
  }
}

// A segment smaller than one element still moves one element per message.
TEST(RingTest, SegmentSmallerThanAnElement) {
  CheckAllReduce(3, 1001, DType::kFloat64, ReduceOp::kSum, 1);
}

// Non-integer inputs: the result depends on the order of the additions, so compare with a
// tolerance. Each of the P-1 additions and the final rounding err by at most one unit roundoff
// u of the dtype (2^-24 fp32, 2^-11 fp16, 2^-8 bf16) relative to a partial sum bounded by
// sum_q |x_q|: |got - exact| <= P * u * sum_q |x_q|.
TEST(RingTest, NonIntegerInputsWithinRoundingBound) {
  const int P = 7;
  const size_t count = kMidCount;
  for (auto [dtype, u] : {std::pair{DType::kFloat32, 0x1p-24}, std::pair{DType::kFloat16, 0x1p-11},
                          std::pair{DType::kBFloat16, 0x1p-8}}) {
    SCOPED_TRACE(DTypeName(dtype));
    std::mt19937 rng(42);
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    std::vector<Buffer> bufs(P);
    std::vector<double> exact(count, 0.0), magnitude(count, 0.0);
    for (int q = 0; q < P; ++q) {
      bufs[q] = Encode(dtype, count, [&](size_t) { return dist(rng); });
      for (size_t i = 0; i < count; ++i) {
        double x = Load(dtype, bufs[q].data(), i);  // the input as the dtype holds it
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
      o.segment_bytes = 256;
      return RingAllReduce(o);
    });
    ASSERT_TRUE(FirstError(statuses).ok()) << FirstError(statuses);
    for (int q = 0; q < P; ++q) {
      for (size_t i = 0; i < count; ++i) {
        double got = Load(dtype, bufs[q].data(), i);
        ASSERT_LE(std::abs(got - exact[i]), P * u * magnitude[i])
            << "rank " << q << " element " << i;
        // Every rank holds the same bits: the all-gather copies one rank's result.
        ASSERT_EQ(got, Load(dtype, bufs[0].data(), i));
      }
    }
  }
}

}  // namespace
}  // namespace herd::collectives::testing
