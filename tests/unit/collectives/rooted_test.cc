// Broadcast and reduce, linear pipeline and binomial tree, with roots other than 0. Every
// (operation, algorithm, P) is one test looping over dtypes, counts and roots; small counts use
// 8-byte blocks, 10007 elements 1 KiB blocks, 1000003 the default block size with root P/2.

#include <set>
#include <tuple>

#include <gtest/gtest.h>

#include "algorithms/collectives/run.h"
#include "tests/unit/collectives/collective_test_util.h"

namespace herd::collectives::testing {
namespace {

using transport::Communicator;
using transport::LoopbackFabric;

constexpr DType kDTypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16};

std::vector<int> Roots(int P) {
  std::set<int> roots{0, P / 2, P - 1};
  return {roots.begin(), roots.end()};
}

std::vector<size_t> Counts(int P) {
  std::vector<size_t> counts = SmallCounts(P);
  counts.push_back(kMidCount);
  return counts;
}

void CheckBroadcast(Algorithm algorithm, int P, size_t count, DType dtype, int root, size_t block) {
  SCOPED_TRACE(CaseName(P, count, dtype, ReduceOp::kSum) + " root=" + std::to_string(root));
  const Buffer want = Input(dtype, count, root);
  std::vector<Buffer> bufs(P);
  for (int q = 0; q < P; ++q) bufs[q] = q == root ? want : Filled(dtype, count, kSentinel);
  auto statuses = RunRanks(P, [&](Communicator& comm, LoopbackFabric&) {
    BroadcastOptions o;
    o.comm = &comm;
    o.dtype = dtype;
    o.data = bufs[comm.rank()].data();
    o.count = count;
    o.root = root;
    o.tag = 5;
    o.timeout = kTimeout;
    if (block > 0) o.block_bytes = block;
    return Broadcast(o, algorithm);
  });
  ASSERT_TRUE(FirstError(statuses).ok()) << FirstError(statuses);
  for (int q = 0; q < P; ++q) {
    EXPECT_TRUE(SameElements(dtype, bufs[q], want, 0, count)) << "rank " << q;
  }
}

void CheckReduce(Algorithm algorithm, int P, size_t count, DType dtype, ReduceOp op, int root,
                 size_t block) {
  SCOPED_TRACE(CaseName(P, count, dtype, op) + " root=" + std::to_string(root));
  const Buffer want = Reference(dtype, op, P, count);
  std::vector<Buffer> bufs(P);
  for (int q = 0; q < P; ++q) bufs[q] = Input(dtype, count, q);
  auto statuses = RunRanks(P, [&](Communicator& comm, LoopbackFabric&) {
    ReduceOptions o;
    o.comm = &comm;
    o.dtype = dtype;
    o.data = bufs[comm.rank()].data();
    o.count = count;
    o.op = op;
    o.root = root;
    o.tag = 6;
    o.timeout = kTimeout;
    if (block > 0) o.block_bytes = block;
    return Reduce(o, algorithm);
  });
  ASSERT_TRUE(FirstError(statuses).ok()) << FirstError(statuses);
  EXPECT_TRUE(SameElements(dtype, bufs[root], want, 0, count)) << "root " << root;
}

// 8-byte blocks for the small counts, 1 KiB (tens of blocks) for 10007 elements.
size_t RootedBlockFor(size_t count) { return count == kMidCount ? 1024 : 8; }

class RootedSweep : public ::testing::TestWithParam<std::tuple<Algorithm, int>> {};

TEST_P(RootedSweep, Broadcast) {
  auto [algorithm, P] = GetParam();
  for (DType dtype : kDTypes) {
    for (size_t count : Counts(P)) {
      for (int root : Roots(P))
        CheckBroadcast(algorithm, P, count, dtype, root, RootedBlockFor(count));
    }
  }
  CheckBroadcast(algorithm, P, kLargeCount, DType::kFloat32, P / 2, 0);
}

TEST_P(RootedSweep, Reduce) {
  auto [algorithm, P] = GetParam();
  for (DType dtype : kDTypes) {
    for (size_t count : Counts(P)) {
      for (int root : Roots(P)) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
          CheckReduce(algorithm, P, count, dtype, op, root, RootedBlockFor(count));
        }
      }
    }
    CheckReduce(algorithm, P, kLargeCount, dtype, ReduceOp::kAverage, P / 2, 0);
  }
  for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
    CheckReduce(algorithm, P, P + 1, DType::kBFloat16, op, P - 1, 8);
    CheckReduce(algorithm, P, P + 1, DType::kInt32, op, P / 2, 8);
  }
}

INSTANTIATE_TEST_SUITE_P(Collectives, RootedSweep,
                         ::testing::Combine(::testing::Values(Algorithm::kLinearPipeline,
                                                              Algorithm::kBinomialTree),
                                            ::testing::Values(1, 2, 3, 4, 5, 7, 8, 16)),
                         [](const auto& info) {
                           return absl::StrFormat("%s_P%d", AlgorithmName(std::get<0>(info.param)),
                                                  std::get<1>(info.param));
                         });

}  // namespace
}  // namespace herd::collectives::testing
