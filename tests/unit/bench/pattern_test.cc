// The --check pattern: exact in every dtype, and a verification that finds the first wrong
// element of every operation's result.

#include "bench/pattern.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "algorithms/collectives/options.h"
#include "common/reduce.h"

namespace herd::bench {
namespace {

using collectives::ChunkBegin;
using collectives::ChunkSize;

// Each rank's filled input, as the ranks would fill them.
std::vector<std::vector<std::byte>> Inputs(BenchOp op, DType dtype, int ranks, size_t count,
                                           std::vector<std::vector<std::byte>>* outs) {
  const size_t esize = DTypeSize(dtype);
  std::vector<std::vector<std::byte>> in(ranks);
  for (int r = 0; r < ranks; ++r) {
    in[r].resize(count * esize);
    (*outs)[r].resize(ranks * ChunkSize(count, ranks, r) * esize);
    PrepareHerdInputs(op, dtype, ranks, r, count, in[r].data(), (*outs)[r].data());
  }
  return in;
}

// A correct reference implementation of each operation, in memory, to feed the verifier.
void Simulate(BenchOp op, DType dtype, int ranks, size_t count,
              std::vector<std::vector<std::byte>>& data,
              std::vector<std::vector<std::byte>>& outs) {
  const size_t esize = DTypeSize(dtype);
  auto sum_all = [&] {
    std::vector<std::byte> total = data[0];
    for (int r = 1; r < ranks; ++r)
      ReduceInto(dtype, ReduceOp::kSum, total.data(), data[r].data(), count);
    return total;
  };
  switch (op) {
    case BenchOp::kAllReduce:
    case BenchOp::kReduceScatter:
    case BenchOp::kReduce: {
      auto total = sum_all();
      for (auto& d : data) d = total;
      return;
    }
    case BenchOp::kAllGather:
      for (int c = 0; c < ranks; ++c) {
        const size_t b = ChunkBegin(count, ranks, c) * esize,
                     n = ChunkSize(count, ranks, c) * esize;
        for (int r = 0; r < ranks; ++r) std::memcpy(data[r].data() + b, data[c].data() + b, n);
      }
      return;
    case BenchOp::kBroadcast:
      for (int r = 1; r < ranks; ++r) data[r] = data[0];
      return;
    case BenchOp::kAllToAll:
      for (int r = 0; r < ranks; ++r) {
        const size_t block = ChunkSize(count, ranks, r) * esize;
        for (int j = 0; j < ranks; ++j) {
          std::memcpy(outs[r].data() + j * block,
                      data[j].data() + ChunkBegin(count, ranks, r) * esize, block);
        }
      }
      return;
  }
}

class PatternTest : public ::testing::TestWithParam<std::tuple<BenchOp, DType, int>> {};

TEST_P(PatternTest, CorrectResultsVerifyAndACorruptElementIsFound) {
  const auto [op, dtype, ranks] = GetParam();
  const size_t count = 1001;  // not a multiple of any rank count here
  std::vector<std::vector<std::byte>> outs(ranks);
  auto data = Inputs(op, dtype, ranks, count, &outs);
  Simulate(op, dtype, ranks, count, data, outs);
  for (int r = 0; r < ranks; ++r) {
    auto bad = VerifyHerdOutputs(op, dtype, ranks, r, count, data[r].data(), outs[r].data());
    EXPECT_FALSE(bad) << "rank " << r << " index " << bad->index << " got " << bad->got
                      << " expected " << bad->expected;
  }
  // Corrupt the last rank's element that its check covers first, past index 0 where possible.
  const int victim = op == BenchOp::kReduce ? 0 : ranks - 1;
  const size_t esize = DTypeSize(dtype);
  size_t index = op == BenchOp::kReduceScatter ? ChunkBegin(count, ranks, victim) + 3 : 7;
  auto& target = op == BenchOp::kAllToAll ? outs[victim] : data[victim];
  FillConstant(dtype, target.data() + index * esize, 1, kSentinel);
  auto bad =
      VerifyHerdOutputs(op, dtype, ranks, victim, count, data[victim].data(), outs[victim].data());
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->index, index);
  EXPECT_EQ(bad->got, kSentinel);
}

INSTANTIATE_TEST_SUITE_P(
    OpsTypesRanks, PatternTest,
    ::testing::Combine(
        ::testing::Values(BenchOp::kAllReduce, BenchOp::kReduceScatter, BenchOp::kAllGather,
                          BenchOp::kBroadcast, BenchOp::kReduce, BenchOp::kAllToAll),
        ::testing::Values(DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16),
        ::testing::Values(1, 3, 4)));

TEST(Pattern, SumsStayExactInSixteenBitTypesAtManyRanks) {
  // bf16 holds integers up to 256 exactly: at 64 ranks the amplitude shrinks to 4.
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    for (int ranks : {2, 32, 64, 128}) {
      const size_t count = 4096;
      std::vector<std::byte> total(count * 2), one(count * 2);
      FillRank(dtype, total.data(), count, ranks, 0, 0);
      for (int r = 1; r < ranks; ++r) {
        FillRank(dtype, one.data(), count, ranks, r, 0);
        ReduceInto(dtype, ReduceOp::kSum, total.data(), one.data(), count);
      }
      EXPECT_FALSE(CheckSum(dtype, total.data(), count, ranks, 0))
          << DTypeName(dtype) << " at " << ranks << " ranks";
    }
  }
}

TEST(Pattern, ValuesDependOnRankAndIndexWithoutShortPeriod) {
  // A chunk shifted by any small offset must not look right: no period up to 64.
  for (uint64_t shift = 1; shift <= 64; ++shift) {
    int same = 0;
    for (uint64_t i = 0; i < 256; ++i) {
      same += InputValue(DType::kFloat32, 4, 1, i) == InputValue(DType::kFloat32, 4, 1, i + shift);
    }
    EXPECT_LT(same, 64) << "shift " << shift;
  }
  int same_rank = 0;
  for (uint64_t i = 0; i < 256; ++i) {
    same_rank += InputValue(DType::kFloat32, 4, 1, i) == InputValue(DType::kFloat32, 4, 2, i);
  }
  EXPECT_LT(same_rank, 64);
  EXPECT_FALSE(PatternSupports(DType::kInt32));
}

}  // namespace
}  // namespace herd::bench
