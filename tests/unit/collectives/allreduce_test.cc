// Linear-pipeline, binomial-tree, recursive-doubling, recursive-halving/doubling, one-shot and
// auto all-reduce (through the dispatcher of run.h), swept over
// P x count x dtype x op like the ring: every (algorithm, P) is one test, looping over dtypes,
// counts {0, 1, P-1, P+1, 10007, 1000003} and sum/avg (block sizes: see BlockFor).

#include <tuple>

#include <gtest/gtest.h>

#include "algorithms/collectives/run.h"
#include "tests/unit/collectives/collective_test_util.h"

namespace herd::collectives::testing {
namespace {

using transport::Communicator;
using transport::LoopbackFabric;

void CheckAllReduce(Algorithm algorithm, int P, size_t count, DType dtype, ReduceOp op,
                    size_t block) {
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
    o.tag = 11;
    o.timeout = kTimeout;
    if (block > 0) o.block_bytes = block;
    return AllReduce(o, algorithm);
  });
  ASSERT_TRUE(FirstError(statuses).ok()) << FirstError(statuses);
  for (int q = 0; q < P; ++q) {
    EXPECT_TRUE(SameElements(dtype, bufs[q], want, 0, count)) << "rank " << q;
  }
}

// 8-byte blocks for the small counts (several blocks even for a few elements), 1 KiB for 10007
// elements (tens of blocks), the default (0) for 1000003.
size_t BlockFor(size_t count) { return count == kLargeCount ? 0 : count == kMidCount ? 1024 : 8; }

class AllReduceSweep : public ::testing::TestWithParam<std::tuple<Algorithm, int>> {};

TEST_P(AllReduceSweep, MatchesReference) {
  auto [algorithm, P] = GetParam();
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    std::vector<size_t> counts = SmallCounts(P);
    counts.push_back(kMidCount);
    // One-shot keeps P-1 copies of the vector per rank: 16 ranks x 15 x 8 MB is more memory
    // than a test should take, and nobody runs it at that size.
    if (algorithm != Algorithm::kOneShot || P <= 8) counts.push_back(kLargeCount);
    for (size_t count : counts) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        CheckAllReduce(algorithm, P, count, dtype, op, BlockFor(count));
      }
    }
  }
}

TEST_P(AllReduceSweep, MinMaxAndIntegers) {
  auto [algorithm, P] = GetParam();
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt32}) {
    for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
      CheckAllReduce(algorithm, P, P + 1, dtype, op, 8);
    }
  }
  CheckAllReduce(algorithm, P, kMidCount, DType::kInt64, ReduceOp::kSum, BlockFor(kMidCount));
}

INSTANTIATE_TEST_SUITE_P(
    Collectives, AllReduceSweep,
    ::testing::Combine(::testing::Values(Algorithm::kLinearPipeline, Algorithm::kBinomialTree,
                                         Algorithm::kRecursiveDoubling,
                                         Algorithm::kRecursiveHalving, Algorithm::kOneShot,
                                         Algorithm::kAuto),
                       ::testing::Values(1, 2, 3, 4, 5, 7, 8, 16)),
    [](const auto& info) {
      return absl::StrFormat("%s_P%d", AlgorithmName(std::get<0>(info.param)),
                             std::get<1>(info.param));
    });

// A block smaller than one element still moves one element per message.
TEST(LinearPipelineTest, BlockSmallerThanAnElement) {
  CheckAllReduce(Algorithm::kLinearPipeline, 4, 301, DType::kFloat64, ReduceOp::kSum, 3);
}

}  // namespace
}  // namespace herd::collectives::testing
