// The dense collectives over the UCX backend, four real processes: results checked against a
// reference every process computes locally (each regenerates every rank's input from a seed),
// and a rank killed in the middle of an all-reduce.
//
// Inputs are small integers stored as floating point, so every partial sum is exact and the
// results must match the reference bit for bit whatever the reduction order.

#include <signal.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <iostream>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "algorithms/collectives/allgather.h"
#include "algorithms/collectives/allreduce.h"
#include "algorithms/collectives/reduce_scatter.h"
#include "tests/integration/killed_rank_expectations.h"
#include "tests/integration/process_ranks.h"

namespace herd::collectives {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using transport::Communicator;
using namespace std::chrono_literals;

constexpr int kRanks = 4;
// Not a multiple of 4, so the chunks differ in size; about 12 MiB of fp32.
constexpr size_t kCount = 3'000'017;
constexpr uint64_t kSeed = 20261121;

// Element i of rank r's input: an integer in [-100, 100] from a hash of (seed, rank, i).
template <typename T>
T InputOf(int rank, size_t i) {
  uint64_t x = kSeed ^ (uint64_t(rank) << 40) ^ i;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<T>(static_cast<int>(x % 201) - 100);
}

template <typename T>
std::vector<T> Input(int rank, size_t count) {
  std::vector<T> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = InputOf<T>(rank, i);
  return v;
}

// The element-wise sum (or average) over all ranks' inputs.
template <typename T>
std::vector<T> Reduced(int size, size_t count, ReduceOp op) {
  std::vector<T> sum(count, T(0));
  for (int r = 0; r < size; ++r) {
    for (size_t i = 0; i < count; ++i) sum[i] += InputOf<T>(r, i);
  }
  if (op == ReduceOp::kAverage) {
    for (T& x : sum) x /= static_cast<T>(size);
  }
  return sum;
}

// Compares data[begin, end) with want[begin, end); names the first difference.
template <typename T>
absl::Status Compare(const std::vector<T>& data, const std::vector<T>& want, size_t begin,
                     size_t end, const char* what) {
  for (size_t i = begin; i < end; ++i) {
    if (data[i] != want[i]) {
      return absl::DataLossError(absl::StrFormat("%s: element %d is %g, expected %g", what, i,
                                                 static_cast<double>(data[i]),
                                                 static_cast<double>(want[i])));
    }
  }
  return absl::OkStatus();
}

template <typename T>
constexpr DType DTypeOf() {
  return sizeof(T) == 4 ? DType::kFloat32 : DType::kFloat64;
}

template <typename T>
absl::Status CheckAllReduce(Communicator& comm, ReduceOp op,
                            absl::Status (*algorithm)(const AllReduceOptions&), const char* name) {
  std::vector<T> data = Input<T>(comm.rank(), kCount);
  AllReduceOptions o;
  o.comm = &comm;
  o.dtype = DTypeOf<T>();
  o.data = data.data();
  o.count = kCount;
  o.op = op;
  o.timeout = 60s;
  if (absl::Status st = algorithm(o); !st.ok()) return st;
  return Compare(data, Reduced<T>(comm.size(), kCount, op), 0, kCount, name);
}

template <typename T>
absl::Status CheckReduceScatter(Communicator& comm, ReduceOp op) {
  std::vector<T> data = Input<T>(comm.rank(), kCount);
  ReduceScatterOptions o;
  o.comm = &comm;
  o.dtype = DTypeOf<T>();
  o.data = data.data();
  o.count = kCount;
  o.op = op;
  o.timeout = 60s;
  if (absl::Status st = RingReduceScatter(o); !st.ok()) return st;
  // Only this rank's chunk is defined afterwards.
  size_t begin = ChunkBegin(kCount, comm.size(), comm.rank());
  return Compare(data, Reduced<T>(comm.size(), kCount, op), begin,
                 begin + ChunkSize(kCount, comm.size(), comm.rank()), "RingReduceScatter");
}

template <typename T>
absl::Status CheckAllGather(Communicator& comm, absl::Status (*algorithm)(const AllGatherOptions&),
                            const char* name) {
  // The gathered vector: chunk c comes from rank c's input. Before the call only this rank's
  // chunk is set; the rest holds a value no rank sends.
  std::vector<T> want(kCount);
  for (int r = 0; r < comm.size(); ++r) {
    size_t begin = ChunkBegin(kCount, comm.size(), r);
    for (size_t i = begin; i < begin + ChunkSize(kCount, comm.size(), r); ++i) {
      want[i] = InputOf<T>(r, i);
    }
  }
  std::vector<T> data(kCount, T(-12345));
  size_t mine = ChunkBegin(kCount, comm.size(), comm.rank());
  for (size_t i = mine; i < mine + ChunkSize(kCount, comm.size(), comm.rank()); ++i) {
    data[i] = want[i];
  }
  AllGatherOptions o;
  o.comm = &comm;
  o.dtype = DTypeOf<T>();
  o.data = data.data();
  o.count = kCount;
  o.timeout = 60s;
  if (absl::Status st = algorithm(o); !st.ok()) return st;
  return Compare(data, want, 0, kCount, name);
}

void ExpectEveryRankSucceeds(
    const std::function<absl::Status(Communicator&, herd::testing::ParentChannel&)>& body) {
  herd::testing::ProcessRanksOptions options;
  options.size = kRanks;
  options.timeout = 120s;
  for (const auto& o : herd::testing::RunProcessRanks(options, body)) {
    EXPECT_TRUE(o.exited && o.exit_code == 0 && o.status.ok()) << o.Describe();
  }
}

TEST(UcxCollectivesTest, RingAllReduce) {
  ExpectEveryRankSucceeds([](Communicator& comm, herd::testing::ParentChannel&) {
    absl::Status st = CheckAllReduce<float>(comm, ReduceOp::kSum, RingAllReduce, "fp32 sum");
    if (st.ok()) st = CheckAllReduce<double>(comm, ReduceOp::kAverage, RingAllReduce, "fp64 avg");
    return st;
  });
}

TEST(UcxCollectivesTest, RingReduceScatter) {
  ExpectEveryRankSucceeds([](Communicator& comm, herd::testing::ParentChannel&) {
    absl::Status st = CheckReduceScatter<float>(comm, ReduceOp::kSum);
    if (st.ok()) st = CheckReduceScatter<double>(comm, ReduceOp::kAverage);
    return st;
  });
}

TEST(UcxCollectivesTest, RingAllGather) {
  ExpectEveryRankSucceeds([](Communicator& comm, herd::testing::ParentChannel&) {
    return CheckAllGather<float>(comm, RingAllGather, "RingAllGather");
  });
}

TEST(UcxCollectivesTest, LinearPipelineAllReduce) {
  ExpectEveryRankSucceeds([](Communicator& comm, herd::testing::ParentChannel&) {
    absl::Status st =
        CheckAllReduce<float>(comm, ReduceOp::kSum, LinearPipelineAllReduce, "fp32 sum");
    if (st.ok()) {
      st = CheckAllReduce<double>(comm, ReduceOp::kAverage, LinearPipelineAllReduce, "fp64 avg");
    }
    return st;
  });
}

TEST(UcxCollectivesTest, BruckAllGather) {
  ExpectEveryRankSucceeds([](Communicator& comm, herd::testing::ParentChannel&) {
    absl::Status st = CheckAllGather<float>(comm, BruckAllGather, "BruckAllGather fp32");
    if (st.ok()) st = CheckAllGather<double>(comm, BruckAllGather, "BruckAllGather fp64");
    return st;
  });
}

TEST(UcxCollectivesTest, RankKilledMidAllReduceIsNamedBySurvivors) {
  constexpr int kVictim = 2;
  herd::testing::ProcessRanksOptions options;
  options.size = kRanks;
  options.timeout = 60s;
  auto outcomes = herd::testing::RunProcessRanks(
      options, [](Communicator& comm, herd::testing::ParentChannel& parent) -> absl::Status {
        std::vector<float> data(size_t{16} << 20 >> 2, 1.0f);  // 16 MiB
        AllReduceOptions o;
        o.comm = &comm;
        o.data = data.data();
        o.count = data.size();
        o.segment_bytes = 256 << 10;  // many messages per step, so the kill lands mid-step
        o.timeout = 20s;              // far beyond the detection bound checked below
        for (int iteration = 0; iteration < 50; ++iteration) {
          std::thread killer;
          if (comm.rank() == kVictim && iteration == 2) {
            // Dies a moment into the third all-reduce, from another thread of the process.
            killer = std::thread([&parent] {
              std::this_thread::sleep_for(3ms);
              parent.Stamp("killed_at");
              ::raise(SIGKILL);
            });
          }
          absl::Status st = RingAllReduce(o);
          if (killer.joinable()) killer.join();
          if (!st.ok()) {
            parent.Stamp("failed_at");
            return st;
          }
        }
        return absl::OkStatus();
      });

  herd::testing::ExpectSurvivorsNameTheVictim(outcomes, kVictim);
}

}  // namespace
}  // namespace herd::collectives
