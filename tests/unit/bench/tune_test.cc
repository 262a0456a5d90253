// `herd bench collectives --tune`: from measured results to decision-table rules, and the
// merge into a file that holds other rank counts.

#include "bench/tune.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "common/temp_dir.h"

namespace herd::bench {
namespace {

namespace coll = collectives;

BenchResult Herd(BenchOp op, const std::string& algo, size_t bytes, double seconds) {
  return MakeResult("herd", op, algo, 4, bytes, bytes, "fp32", 10, seconds);
}

TEST(Tune, FastestPerSizeBoundsAtTheGeometricMeanClassicAboveTheLargestSize) {
  const std::vector<BenchResult> results = {
      Herd(BenchOp::kAllReduce, "ring", 1024, 3e-5),
      Herd(BenchOp::kAllReduce, "rd", 1024, 1e-5),
      Herd(BenchOp::kAllReduce, "ring", 4096, 4e-5),
      Herd(BenchOp::kAllReduce, "rd", 4096, 2e-5),
      Herd(BenchOp::kAllReduce, "ring", 16384, 5e-5),
      Herd(BenchOp::kAllReduce, "rd", 16384, 9e-5),
      // auto, peers and operations without a table are ignored.
      Herd(BenchOp::kAllReduce, "auto", 16384, 1e-9),
      MakeResult("mpi", BenchOp::kAllReduce, "MPI_Allreduce", 4, 16384, 16384, "fp32", 10, 1e-9),
      Herd(BenchOp::kAllToAll, "pairwise", 1024, 1e-6),
      Herd(BenchOp::kAllGather, "bruck", 1024, 1e-5),
  };
  const auto rules = RulesFromResults(results, 4, 4);
  ASSERT_EQ(rules.size(), 4u);
  EXPECT_EQ(rules[0].op, coll::CollectiveOp::kAllReduce);
  EXPECT_EQ(rules[0].algorithm, coll::Algorithm::kRecursiveDoubling);
  EXPECT_EQ(rules[0].up_to_bytes, 8192u);  // sqrt(4096 * 16384)
  EXPECT_EQ(rules[1].algorithm, coll::Algorithm::kRing);
  EXPECT_EQ(rules[1].up_to_bytes, coll::kUnbounded);
  EXPECT_EQ(rules[2].op, coll::CollectiveOp::kAllGather);
  EXPECT_EQ(rules[2].algorithm, coll::Algorithm::kBruck);
  // Not extrapolated: above the largest measured size the classic ring takes over.
  EXPECT_EQ(rules[2].up_to_bytes, 1024u);
  EXPECT_EQ(rules[3].algorithm, coll::Algorithm::kRing);
  EXPECT_EQ(rules[3].up_to_bytes, coll::kUnbounded);
}

TEST(Tune, APickWithinTenPercentOfTheFastestStays) {
  const std::vector<BenchResult> results = {
      Herd(BenchOp::kReduceScatter, "rh", 1024, 1.0e-5),
      Herd(BenchOp::kReduceScatter, "oneshot", 1024, 2.0e-5),
      // oneshot 5 % faster here: rh stays.
      Herd(BenchOp::kReduceScatter, "rh", 4096, 2.1e-5),
      Herd(BenchOp::kReduceScatter, "oneshot", 4096, 2.0e-5),
      // ring 20 % faster: it takes over.
      Herd(BenchOp::kReduceScatter, "rh", 16384, 6.0e-5),
      Herd(BenchOp::kReduceScatter, "ring", 16384, 5.0e-5),
  };
  const auto rules = RulesFromResults(results, 4, 4);
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[0].algorithm, coll::Algorithm::kRecursiveHalving);
  EXPECT_EQ(rules[0].up_to_bytes, 8192u);
  EXPECT_EQ(rules[1].algorithm, coll::Algorithm::kRing);
}

TEST(Tune, TheClassicFastestAtTheLargestSizeIsNotHeldBack) {
  const std::vector<BenchResult> results = {
      Herd(BenchOp::kReduceScatter, "rh", 4096, 1.0e-5),
      Herd(BenchOp::kReduceScatter, "ring", 4096, 2.0e-5),
      // The ring 8 % faster at the largest size: within the margin, but the ring takes over
      // right above it anyway, so it starts here.
      Herd(BenchOp::kReduceScatter, "rh", 16384, 5.4e-5),
      Herd(BenchOp::kReduceScatter, "ring", 16384, 5.0e-5),
  };
  const auto rules = RulesFromResults(results, 4, 4);
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[0].algorithm, coll::Algorithm::kRecursiveHalving);
  EXPECT_EQ(rules[0].up_to_bytes, 8192u);
  EXPECT_EQ(rules[1].algorithm, coll::Algorithm::kRing);
  EXPECT_EQ(rules[1].up_to_bytes, coll::kUnbounded);
}

TEST(Tune, MergeKeepsOtherRankCountsAndRefusesABadFile) {
  auto dir = TempDir::Create("herd-tune-test");
  ASSERT_TRUE(dir.ok());
  const std::string path = dir->path() + "/table.txt";
  const coll::DecisionRule p2{coll::CollectiveOp::kAllReduce, 2, 4, coll::kUnbounded,
                              coll::Algorithm::kOneShot};
  const coll::DecisionRule p4{coll::CollectiveOp::kAllReduce, 4, 4, coll::kUnbounded,
                              coll::Algorithm::kRing};
  ASSERT_TRUE(MergeIntoTableFile(path, {p2}).ok());
  ASSERT_TRUE(MergeIntoTableFile(path, {p4}).ok());
  auto table = coll::DecisionTable::Load(path);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->rules().size(), 2u);
  EXPECT_EQ(table->Choose(coll::CollectiveOp::kAllReduce, 4, 64, 2), coll::Algorithm::kOneShot);
  EXPECT_EQ(table->Choose(coll::CollectiveOp::kAllReduce, 4, 64, 4), coll::Algorithm::kRing);

  std::ofstream(path) << "allreduce 4 4 inf nonsense\n";
  const absl::Status st = MergeIntoTableFile(path, {p2});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "allreduce 4 4 inf nonsense\n");  // unchanged
}

}  // namespace
}  // namespace herd::bench
