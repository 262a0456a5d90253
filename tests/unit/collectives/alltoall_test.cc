// Pairwise all-to-all: rank r's output block j must be chunk r of rank j's input.

#include <gtest/gtest.h>

#include "algorithms/collectives/alltoall.h"
#include "tests/unit/collectives/collective_test_util.h"

namespace herd::collectives::testing {
namespace {

using transport::Communicator;
using transport::LoopbackFabric;

void CheckAllToAll(int P, size_t count, DType dtype) {
  SCOPED_TRACE(CaseName(P, count, dtype, ReduceOp::kSum));
  std::vector<Buffer> in(P), out(P), want(P);
  for (int q = 0; q < P; ++q) {
    in[q] = Input(dtype, count, q);
    const size_t block = ChunkSize(count, P, q), first = ChunkBegin(count, P, q);
    out[q] = Filled(dtype, block * P, kSentinel);
    want[q] = Encode(dtype, block * P,
                     [&](size_t e) { return InputValue(int(e / block), first + e % block); });
  }
  auto statuses = RunRanks(P, [&](Communicator& comm, LoopbackFabric&) {
    AllToAllOptions o;
    o.comm = &comm;
    o.dtype = dtype;
    o.input = in[comm.rank()].data();
    o.output = out[comm.rank()].data();
    o.count = count;
    o.tag = 4;
    o.timeout = kTimeout;
    return PairwiseAllToAll(o);
  });
  ASSERT_TRUE(FirstError(statuses).ok()) << FirstError(statuses);
  for (int q = 0; q < P; ++q) {
    EXPECT_TRUE(SameElements(dtype, out[q], want[q], 0, want[q].size() / DTypeSize(dtype)))
        << "rank " << q;
  }
}

class AllToAllSweep : public ::testing::TestWithParam<int> {};

TEST_P(AllToAllSweep, MatchesReference) {
  const int P = GetParam();
  for (DType dtype :
       {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt64}) {
    std::vector<size_t> counts = SmallCounts(P);
    counts.push_back(kMidCount);
    for (size_t count : counts) CheckAllToAll(P, count, dtype);
  }
  CheckAllToAll(P, kLargeCount, DType::kFloat32);
}

INSTANTIATE_TEST_SUITE_P(Collectives, AllToAllSweep, ::testing::Values(1, 2, 3, 4, 5, 7, 8, 16),
                         [](const auto& info) { return absl::StrFormat("P%d", info.param); });

}  // namespace
}  // namespace herd::collectives::testing
