// herd's rank sweep over the loopback backend (threads as ranks): every operation and
// algorithm verifies with --check, and a corrupted transfer is caught and located.

#include "bench/herd_sweep.h"

#include <gtest/gtest.h>

#include <mutex>

#include "bench/pattern.h"
#include "tests/support/spawn.h"

namespace herd::bench {
namespace {

SweepSpec SmallSpec() {
  SweepSpec spec;
  spec.ops = AllBenchOps();
  spec.algos = {"auto", "ring", "lp", "tree", "rd", "rh", "oneshot", "bruck", "pairwise"};
  // Odd sizes: uneven chunks, a size that is not a multiple of the element size.
  spec.sizes = {4, 4096, 4002};
  spec.iters = 2;
  spec.warmup = 1;
  spec.check = true;
  spec.timeout = std::chrono::seconds(20);
  return spec;
}

std::vector<BenchResult> RunSweep(int ranks, const SweepSpec& spec) {
  std::mutex mu;
  std::vector<BenchResult> results;
  auto statuses = testing::SpawnRanks(ranks, [&](transport::Communicator& comm) {
    return RunHerdSweep(comm, spec, [&](const BenchResult& r) {
      EXPECT_EQ(comm.rank(), 0) << "only rank 0 reports";
      std::lock_guard<std::mutex> lock(mu);
      results.push_back(r);
    });
  });
  EXPECT_TRUE(testing::FirstError(statuses).ok()) << testing::FirstError(statuses);
  return results;
}

class HerdSweepTest : public ::testing::TestWithParam<std::tuple<int, DType>> {};

TEST_P(HerdSweepTest, EveryOperationAndAlgorithmChecksOk) {
  const auto [ranks, dtype] = GetParam();
  SweepSpec spec = SmallSpec();
  spec.dtype = dtype;
  auto plan = PlanHerdRuns(spec.ops, spec.algos);
  ASSERT_TRUE(plan.ok());
  const auto results = RunSweep(ranks, spec);
  ASSERT_EQ(results.size(), plan->runs.size() * spec.sizes.size());
  for (const BenchResult& r : results) {
    SCOPED_TRACE(ToJsonLine(r));
    EXPECT_EQ(r.check, kCheckOk) << r.detail;
    EXPECT_EQ(r.impl, "herd");
    EXPECT_EQ(r.ranks, ranks);
    EXPECT_EQ(r.dtype, DTypeName(dtype));
    EXPECT_EQ(r.iters, 2);
    EXPECT_EQ(r.bytes, r.requested_bytes / DTypeSize(dtype) * DTypeSize(dtype));
    EXPECT_TRUE(r.measured());
    EXPECT_GT(r.algbw_gbps, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(RanksAndTypes, HerdSweepTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 5),
                                            ::testing::Values(DType::kFloat32, DType::kBFloat16)));

// Flips the first element of every message rank 1 sends to rank 0 that carries collective
// data, so the sweep's own verification must notice.
class CorruptingCommunicator : public transport::Communicator {
 public:
  explicit CorruptingCommunicator(transport::Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string_view backend() const override { return inner_.backend(); }
  transport::Request isend(int peer, transport::Tag tag, ConstBytes buf) override {
    const bool data =
        tag.kind == transport::OpKind::kAllReduce || tag.kind == transport::OpKind::kReduceScatter;
    if (rank() == 1 && peer == 0 && data && buf.size() >= 4) {
      copy_.assign(buf.begin(), buf.end());
      float v;
      std::memcpy(&v, copy_.data(), 4);
      v += 1.0f;
      std::memcpy(copy_.data(), &v, 4);
      buf = ConstBytes(copy_.data(), copy_.size());
    }
    return inner_.isend(peer, tag, buf);
  }
  transport::Request irecv(int peer, transport::Tag tag, MutableBytes buf) override {
    return inner_.irecv(peer, tag, buf);
  }
  absl::Status wait(transport::Request& req, Deadline deadline) override {
    return inner_.wait(req, deadline);
  }
  absl::Status abort(absl::Status why) override { return inner_.abort(std::move(why)); }
  absl::Status status() const override { return inner_.status(); }

 private:
  transport::Communicator& inner_;
  // Loopback sends are rendezvous (complete once received), so one copy at a time suffices
  // for ring steps that wait for each send before the next.
  std::vector<std::byte> copy_;
};

TEST(HerdSweepCheck, CorruptedDataFailsTheCheckNamingRankAndIndex) {
  SweepSpec spec;
  spec.ops = {BenchOp::kAllReduce};
  spec.algos = {"tree"};
  spec.sizes = {64};
  spec.iters = 1;
  spec.warmup = 0;
  spec.check = true;
  spec.timeout = std::chrono::seconds(20);
  std::vector<BenchResult> results;
  auto statuses = testing::SpawnRanks(2, [&](transport::Communicator& comm) {
    CorruptingCommunicator bad(comm);
    return RunHerdSweep(bad, spec, [&](const BenchResult& r) { results.push_back(r); });
  });
  ASSERT_TRUE(testing::FirstError(statuses).ok()) << testing::FirstError(statuses);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].check, kCheckFailed);
  // Rank 0 reduces rank 1's corrupted vector first; element 0 is off by one.
  EXPECT_NE(results[0].detail.find("allreduce tree 64: rank 0 element 0"), std::string::npos)
      << results[0].detail;
}

TEST(HerdSweepCheck, WithoutCheckTheResultSaysOff) {
  SweepSpec spec = SmallSpec();
  spec.check = false;
  spec.ops = {BenchOp::kAllGather};
  spec.algos = {};
  const auto results = RunSweep(2, spec);
  ASSERT_EQ(results.size(), spec.sizes.size());
  for (const BenchResult& r : results) {
    EXPECT_EQ(r.check, kCheckOff);
    EXPECT_EQ(r.algo, "auto");  // the default
  }
}

}  // namespace
}  // namespace herd::bench
