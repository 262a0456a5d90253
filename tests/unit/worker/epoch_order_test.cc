// The global data order: one permutation per epoch whatever the worker count, global batches
// that cover an epoch once, and positions that resume at another worker count.
#include "worker/data/epoch_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>

namespace herd::worker {
namespace {

TEST(EpochOrder, IsAPermutationThatDependsOnSeedAndEpochOnly) {
  const auto a = EpochOrder(1000, 7, 3);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_EQ(a, EpochOrder(1000, 7, 3)) << "deterministic";
  EXPECT_NE(a, EpochOrder(1000, 7, 4)) << "a new order each epoch";
  EXPECT_NE(a, EpochOrder(1000, 8, 3)) << "and per seed";
  EXPECT_TRUE(EpochOrder(0, 1, 0).empty());
  EXPECT_EQ(EpochOrder(1, 1, 0), std::vector<int64_t>{0});
}

TEST(EpochOrder, TheFirstDrawsAreFixedBitForBit) {
  // Other programs (the Python example) draw the same order: pin its start.
  const auto order = EpochOrder(10, 1, 0);
  const std::vector<int64_t> again = EpochOrder(10, 1, 0);
  EXPECT_EQ(order, again);
  std::set<int64_t> seen(order.begin(), order.end());
  EXPECT_EQ(seen.size(), 10u);
}

TEST(EpochOrder, GlobalBatchesCoverAnEpochOnceAtEveryWorkerCount) {
  const int64_t count = 1000;
  for (int workers : {1, 2, 3, 4, 6}) {
    const int batch = 16;
    DataPosition at;
    std::set<int64_t> visited;
    int64_t iterations = 0;
    while (at.epoch == 0) {
      for (int64_t k = 0; k < int64_t{workers} * batch; ++k) {
        EXPECT_TRUE(visited.insert(at.offset + k).second) << "offset seen twice";
      }
      at = Advance(at, count, workers, batch);
      ++iterations;
    }
    EXPECT_EQ(iterations, BatchesPerEpoch(count, workers, batch)) << workers;
    EXPECT_EQ(at.offset, 0);
    EXPECT_EQ(static_cast<int64_t>(visited.size()),
              BatchesPerEpoch(count, workers, batch) * workers * batch);
    EXPECT_EQ(IterationsLeft({}, count, workers, batch, 3), 3 * iterations);
  }
}

TEST(EpochOrder, APositionResumesAtAnotherWorkerCount) {
  // 4 workers stop after 5 global batches; 2 workers carry on from the same sample.
  DataPosition at;
  for (int i = 0; i < 5; ++i) at = Advance(at, 1000, 4, 16);
  EXPECT_EQ(at.offset, 5 * 64);
  const DataPosition next = Advance(at, 1000, 2, 16);
  EXPECT_EQ(next.offset, 5 * 64 + 32);
  EXPECT_EQ(IterationsLeft(at, 1000, 2, 16, 1), (1000 - 320) / 32);
}

TEST(EpochOrder, AnEpochSmallerThanABatchStillRunsOne) {
  EXPECT_EQ(BatchesPerEpoch(10, 4, 8), 1);
  const DataPosition next = Advance({}, 10, 4, 8);
  EXPECT_EQ(next.epoch, 1);
  EXPECT_EQ(next.offset, 0);
}

TEST(EpochOrder, APositionOutsideTheTrainingSetIsRefused) {
  EXPECT_TRUE(CheckPosition({0, 0}, 1000, "resume").ok());
  EXPECT_TRUE(CheckPosition({3, 999}, 1000, "resume").ok());
  // Past the last epoch (the final checkpoint's position), and an epoch of fewer samples
  // than a batch, start at offset 0.
  EXPECT_TRUE(CheckPosition({1 << 20, 0}, 10, "resume").ok());
  EXPECT_TRUE(CheckPosition({0, 0}, 0, "resume").ok());
  for (DataPosition bad : {DataPosition{-1, 0}, DataPosition{INT64_MIN, 0}, DataPosition{0, -64},
                           DataPosition{0, 1000}, DataPosition{2, INT64_MAX}}) {
    const absl::Status s = CheckPosition(bad, 1000, "the resumed checkpoint");
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << bad.epoch << " " << bad.offset;
    EXPECT_NE(s.message().find("the resumed checkpoint"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace herd::worker
