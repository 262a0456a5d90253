// The per-call driver of herd_sparse_bench and herd_lowprec_bench (bench/percall/per_call.h)
// over loopback ranks: every operation runs, its row carries what the tables show, both
// timings work, and a row survives its trip through JSON.

#include "bench/percall/per_call.h"

#include <gtest/gtest.h>

namespace herd::bench {
namespace {

PerCallSpec Small() {
  PerCallSpec spec;
  spec.params.count = 10007;  // not a multiple of the rank count
  spec.params.average = true;
  spec.params.density = 0.05;
  spec.params.timeout = std::chrono::seconds(20);
  spec.timing = {1, 3, /*per_call=*/true};
  return spec;
}

TEST(PerCall, EveryOperationMeasuresOverLoopback) {
  PerCallSpec spec = Small();
  spec.ops = {"spardl",          "topa", "ring", "clps", "decentralized", "decentralized_whole",
              "decentralized_lp"};
  auto rows = RunLoopback(3, spec);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), spec.ops.size());
  for (size_t i = 0; i < rows->size(); ++i) {
    const Row& r = (*rows)[i];
    SCOPED_TRACE(ToJson(r).Write());
    EXPECT_EQ(r.algo, spec.ops[i]);
    EXPECT_EQ(r.transport, "loopback");
    EXPECT_EQ(r.ranks, 3);
    EXPECT_EQ(r.count, 10007u);
    EXPECT_EQ(r.iters, 3);
    EXPECT_GT(r.mean_ms, 0);
    EXPECT_LE(r.min_ms, r.median_ms);
    EXPECT_GE(r.wait_ms, 0);
    EXPECT_EQ(r.density, r.algo == "ring" ? 1.0 : 0.05);
    // The all-reduces leave every rank with the same vector; the decentralized ones do not.
    if (i < 3) {
      EXPECT_TRUE(r.identical);
    }
    const auto back = RowFromJson(*json::ParseObject(ToJson(r).Write()));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->algo, r.algo);
    EXPECT_EQ(back->nonzeros, r.nonzeros);
    EXPECT_NEAR(back->median_ms, r.median_ms, 1e-8 * r.median_ms);  // 10 digits in JSON
    EXPECT_EQ(back->identical, r.identical);
  }
  // The ring's average is dense; the sparse results hold at most what was selected.
  EXPECT_EQ((*rows)[2].nonzeros, 10007u);
  EXPECT_LT((*rows)[0].nonzeros, 10007u);
}

TEST(PerCall, LoopTimingReportsTheMeanForEveryStatistic) {
  PerCallSpec spec = Small();
  spec.ops = {"ring"};
  spec.timing.per_call = false;
  auto rows = RunLoopback(2, spec);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_GT((*rows)[0].mean_ms, 0);
  EXPECT_DOUBLE_EQ((*rows)[0].median_ms, (*rows)[0].mean_ms);
  EXPECT_DOUBLE_EQ((*rows)[0].min_ms, (*rows)[0].mean_ms);
}

TEST(PerCall, AnUnknownOperationIsNamed) {
  PerCallSpec spec = Small();
  spec.ops = {"nope"};
  auto rows = RunLoopback(2, spec);
  EXPECT_EQ(rows.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(rows.status().message().find("unknown operation 'nope'"), std::string::npos)
      << rows.status();
}

TEST(PerCall, RowsWithoutAFieldAreRefused) {
  EXPECT_EQ(RowFromJson(*json::ParseObject(R"({"transport":"ucx"})")).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace herd::bench
