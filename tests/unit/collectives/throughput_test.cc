// Time of the ring and LP collectives over the loopback backend at benchmark sizes. Disabled by
// default (seconds of work, and timings are not assertions on a shared machine); run with
//   build/bin/collectives_test --gtest_also_run_disabled_tests --gtest_filter='*Throughput*'
// It still checks every result, so a run that prints a time also computed the right answer.

#include <cstdio>

#include <gtest/gtest.h>

#include "algorithms/collectives/run.h"
#include "tests/unit/collectives/collective_test_util.h"

namespace herd::collectives::testing {
namespace {

using transport::Communicator;
using transport::LoopbackFabric;

enum class Op { kRingAllReduce, kReduceScatter, kAllGather, kLinearPipelineAllReduce };

const char* OpName(Op op) {
  switch (op) {
    case Op::kRingAllReduce:
      return "ring all-reduce";
    case Op::kReduceScatter:
      return "ring reduce-scatter";
    case Op::kAllGather:
      return "ring all-gather";
    case Op::kLinearPipelineAllReduce:
      return "lp all-reduce";
  }
  return "";
}

// Best of `reps` runs, in seconds; every rank's vector starts as all ones.
double TimeIt(Op op, int P, size_t count, int reps) {
  double best = 1e9;
  for (int rep = 0; rep < reps; ++rep) {
    std::vector<std::vector<float>> bufs(P, std::vector<float>(count, 1.0f));
    const auto start = Clock::now();
    auto statuses = RunRanks(P, [&](Communicator& comm, LoopbackFabric&) {
      float* data = bufs[comm.rank()].data();
      switch (op) {
        case Op::kReduceScatter: {
          ReduceScatterOptions o;
          o.comm = &comm;
          o.data = data;
          o.count = count;
          return RingReduceScatter(o);
        }
        case Op::kAllGather: {
          AllGatherOptions o;
          o.comm = &comm;
          o.data = data;
          o.count = count;
          return RingAllGather(o);
        }
        default: {
          AllReduceOptions o;
          o.comm = &comm;
          o.data = data;
          o.count = count;
          return AllReduce(
              o, op == Op::kRingAllReduce ? Algorithm::kRing : Algorithm::kLinearPipeline);
        }
      }
    });
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
    EXPECT_TRUE(FirstError(statuses).ok()) << FirstError(statuses);
    // Ones everywhere after an all-gather; P in the reduced parts otherwise.
    const float want = op == Op::kAllGather ? 1.0f : float(P);
    for (int q = 0; q < P; ++q) {
      size_t first = op == Op::kReduceScatter ? ChunkBegin(count, P, q) : 0;
      size_t n = op == Op::kReduceScatter ? ChunkSize(count, P, q) : count;
      size_t wrong = 0;
      for (size_t i = first; i < first + n; ++i) wrong += bufs[q][i] != want;
      EXPECT_EQ(wrong, 0u) << OpName(op) << ", rank " << q;
    }
  }
  return best;
}

TEST(LoopbackThroughput, DISABLED_RingAndLinearPipelineAtBenchmarkSizes) {
  const int P = 4;
  for (size_t mib : {16, 64, 256}) {
    const size_t count = (mib << 20) / sizeof(float);
    for (Op op :
         {Op::kRingAllReduce, Op::kReduceScatter, Op::kAllGather, Op::kLinearPipelineAllReduce}) {
      double s = TimeIt(op, P, count, 3);
      std::printf("P=%d fp32 %4zu MiB  %-20s %8.1f ms  algbw %.2f GB/s\n", P, mib, OpName(op),
                  s * 1e3, double(mib << 20) / s / 1e9);
    }
  }
}

}  // namespace
}  // namespace herd::collectives::testing
