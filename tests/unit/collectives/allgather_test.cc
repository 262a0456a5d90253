// All-gather: ring, recursive doubling, Bruck, one-shot and auto (through the dispatcher of run.h).
// Every (algorithm, P) is one test looping over dtypes {fp32, fp64, fp16, bf16, int32, uint8} and
// counts {0, 1, P-1, P+1, 10007, 1000003}. Each rank starts with only its own chunk valid (the
// rest holds a sentinel) and must end with every chunk.

#include <tuple>

#include <gtest/gtest.h>

#include "algorithms/collectives/run.h"
#include "tests/unit/collectives/collective_test_util.h"

namespace herd::collectives::testing {
namespace {

using transport::Communicator;
using transport::LoopbackFabric;

// Element i of the gathered vector: the input of the rank owning chunk i.
Buffer Gathered(DType dtype, size_t count, int P) {
  std::vector<int> owner(count);
  for (int c = 0; c < P; ++c) {
    for (size_t i = ChunkBegin(count, P, c); i < ChunkBegin(count, P, c + 1); ++i) owner[i] = c;
  }
  return Encode(dtype, count, [&](size_t i) { return InputValue(owner[i], i); });
}

void CheckAllGather(Algorithm algorithm, int P, size_t count, DType dtype, size_t segment) {
  SCOPED_TRACE(CaseName(P, count, dtype, ReduceOp::kSum));
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
    o.tag = 9;
    o.timeout = kTimeout;
    if (segment > 0) o.segment_bytes = segment;
    return AllGather(o, algorithm);
  });
  ASSERT_TRUE(FirstError(statuses).ok()) << FirstError(statuses);
  for (int q = 0; q < P; ++q) {
    EXPECT_TRUE(SameElements(dtype, bufs[q], want, 0, count)) << "rank " << q;
  }
}

class AllGatherSweep : public ::testing::TestWithParam<std::tuple<Algorithm, int>> {};

TEST_P(AllGatherSweep, MatchesReference) {
  auto [algorithm, P] = GetParam();
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                      DType::kInt32, DType::kUInt8}) {
    std::vector<size_t> counts = SmallCounts(P);
    counts.push_back(kMidCount);
    counts.push_back(kLargeCount);
    for (size_t count : counts) {
      CheckAllGather(algorithm, P, count, dtype, count == kLargeCount ? 0 : 64);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Collectives, AllGatherSweep,
    ::testing::Combine(::testing::Values(Algorithm::kRing, Algorithm::kRecursiveDoubling,
                                         Algorithm::kBruck, Algorithm::kOneShot, Algorithm::kAuto),
                       ::testing::Values(1, 2, 3, 4, 5, 6, 7, 8, 11, 16)),
    [](const auto& info) {
      return absl::StrFormat("%s_P%d", AlgorithmName(std::get<0>(info.param)),
                             std::get<1>(info.param));
    });

}  // namespace
}  // namespace herd::collectives::testing
