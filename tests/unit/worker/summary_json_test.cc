#include <gtest/gtest.h>

#include "worker/runtime.h"

namespace herd::worker {
namespace {

TEST(SummaryJson, RoundTrips) {
  WorkerSummary s;
  s.rank = 0;
  s.iterations = 702;
  s.final_loss = 0.2813;
  s.test_accuracy = 0.8841;
  s.seconds = 103.86;
  s.samples_per_second = 1730.3;
  s.exposed_comm_seconds = 13.25;
  s.executor = "dear: 3 buckets of at most 4194304 bytes";
  auto back = ParseSummaryJson(SummaryJson(s));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->iterations, 702);
  EXPECT_NEAR(back->test_accuracy, 0.8841, 1e-4);
  EXPECT_NEAR(back->samples_per_second, 1730.3, 0.1);
  EXPECT_EQ(back->executor, s.executor);
}

TEST(SummaryJson, RefusesMissingOrMalformedFields) {
  EXPECT_EQ(ParseSummaryJson("{}").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseSummaryJson("").status().code(), absl::StatusCode::kInvalidArgument);
  WorkerSummary s;
  std::string text = SummaryJson(s);
  text.replace(text.find("\"seconds\":") + 10, 1, "x");
  EXPECT_EQ(ParseSummaryJson(text).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace herd::worker
