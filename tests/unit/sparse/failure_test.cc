// Options refused before anything is sent; a rank dying in the middle of SparDL or TopA; ranks
// that disagree on the count; two sparse all-reduces at once on one communicator.

#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "tests/support/spawn.h"
#include "tests/unit/collectives/forwarding_communicator.h"
#include "tests/unit/sparse/sparse_test_util.h"

namespace herd::sparse::testing {
namespace {

using collectives::testing::ForwardingCommunicator;
using ::testing::HasSubstr;
using transport::Communicator;
using transport::LoopbackFabric;

constexpr std::chrono::milliseconds kShortTimeout = 1500ms;
constexpr std::chrono::milliseconds kSlack = 5000ms;

using Op = absl::Status (*)(const SparseAllReduceOptions&);
const Op kOps[] = {&SparDLAllReduce, &TopkAllGatherAllReduce};

struct Invalid {
  const char* name;
  std::function<void(SparseAllReduceOptions&)> bend;
  absl::StatusCode code = absl::StatusCode::kInvalidArgument;
  bool spardl_only = false;
};

TEST(SparseValidationTest, RefusedBeforeAnythingIsSent) {
  const std::vector<Invalid> cases = {
      {"no communicator", [](auto& o) { o.comm = nullptr; }},
      {"no data", [](auto& o) { o.data = nullptr; }},
      {"no residual", [](auto& o) { o.residual = nullptr; }},
      {"density 0", [](auto& o) { o.density = 0; }},
      {"density above 1", [](auto& o) { o.density = 1.5; }},
      {"density NaN", [](auto& o) { o.density = std::nan(""); }},
      {"fp64", [](auto& o) { o.dtype = DType::kFloat64; }},
      {"tag too large", [](auto& o) { o.tag = transport::Tag::kMaxId + 1; }},
      {"no timeout", [](auto& o) { o.timeout = std::chrono::milliseconds(0); }},
      {"data and residual overlap", [](auto& o) { o.residual = o.data + 3; }},
      {"unknown top-k method", [](auto& o) { o.topk = static_cast<TopkMethod>(7); }},
      {"teams 0", [](auto& o) { o.teams = 0; }, absl::StatusCode::kInvalidArgument, true},
      {"teams not dividing", [](auto& o) { o.teams = 4; }, absl::StatusCode::kInvalidArgument,
       true},
      {"R-SAG over 3 teams",
       [](auto& o) {
         o.teams = 3;
         o.sag = SagAlgorithm::kRecursive;
       },
       absl::StatusCode::kInvalidArgument, true},
      {"unknown SAG", [](auto& o) { o.sag = static_cast<SagAlgorithm>(9); },
       absl::StatusCode::kInvalidArgument, true},
  };
  // Rank 0 of a 6-rank fabric calls alone: anything sent would make it wait for its deadline.
  auto fabric = LoopbackFabric::Create(6);
  auto comm = fabric->communicator(0);
  std::vector<float> data(100, 1.0f), residual(100, 0.0f);
  for (Op op : kOps) {
    for (const Invalid& c : cases) {
      SCOPED_TRACE(c.name);
      if (c.spardl_only && op == &TopkAllGatherAllReduce) continue;  // TopA ignores teams
      ForwardingCommunicator fc(*comm);
      SparseAllReduceOptions o;
      o.comm = &fc;
      o.data = data.data();
      o.residual = residual.data();
      o.count = data.size();
      o.teams = 6;
      o.timeout = kShortTimeout;
      c.bend(o);
      const absl::Status st = op(o);
      EXPECT_EQ(st.code(), c.code) << st;
      EXPECT_EQ(fc.sends() + fc.recvs(), 0);
    }
    ForwardingCommunicator device(*comm);
    device.set_memory(transport::MemoryKind::kCuda);
    SparseAllReduceOptions o;
    o.comm = &device;
    o.data = data.data();
    o.residual = residual.data();
    o.count = data.size();
    EXPECT_EQ(op(o).code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(device.sends() + device.recvs(), 0);
  }
}

struct KillCase {
  const char* name;
  int size;
  int teams;
  SagAlgorithm sag;
  int victim;
  int kill_at_send;
  Op op;
};

class SparseKillTest : public ::testing::TestWithParam<int> {};

const KillCase kKillCases[] = {
    {"SparDL_P5_first_send", 5, 1, SagAlgorithm::kAuto, 2, 1, &SparDLAllReduce},
    {"SparDL_P6_in_gather", 6, 1, SagAlgorithm::kAuto, 4, 6, &SparDLAllReduce},
    {"SparDL_P8_T4_rsag", 8, 4, SagAlgorithm::kRecursive, 5, 2, &SparDLAllReduce},
    {"SparDL_P6_T3_bsag", 6, 3, SagAlgorithm::kBruck, 1, 2, &SparDLAllReduce},
    {"TopA_P4", 4, 1, SagAlgorithm::kAuto, 3, 1, &TopkAllGatherAllReduce},
};

// Every survivor returns an error within the deadline (none hangs), and at least one names the
// victim (the others may report the abort of a survivor, which carries it too).
TEST_P(SparseKillTest, SurvivorsFailWithinTheDeadline) {
  const KillCase& c = kKillCases[GetParam()];
  const auto start = std::chrono::steady_clock::now();
  auto statuses = RunRanksWithFabric(c.size, [&](Communicator& comm, LoopbackFabric& fabric) {
    ForwardingCommunicator fc(comm);
    if (comm.rank() == c.victim) {
      fc.set_on_send([&](int n) {
        if (n == c.kill_at_send)
          fabric.kill(c.victim, absl::UnavailableError("killed by the test"));
      });
    }
    std::vector<float> data(20011), residual(data.size());
    for (size_t i = 0; i < data.size(); ++i) {
      data[i] = Gradient(Inputs::kRandom, comm.rank(), 0, i);
      residual[i] = Gradient(Inputs::kRandom, comm.rank(), 1, i);
    }
    std::vector<float> input(data.size());
    for (size_t i = 0; i < data.size(); ++i) input[i] = data[i] + residual[i];
    SparseAllReduceOptions o;
    o.comm = &fc;
    o.data = data.data();
    o.residual = residual.data();
    o.count = data.size();
    o.density = 0.05;
    o.teams = c.teams;
    o.sag = c.sag;
    o.timeout = kShortTimeout;
    absl::Status st = c.op(o);
    // A failed call loses nothing: gradient + residual is in residual, data is zeroed.
    if (!st.ok() && (data != std::vector<float>(data.size(), 0.0f) || residual != input)) {
      return absl::InternalError(absl::StrFormat("rank %d failed with '%s' but changed its buffers",
                                                 comm.rank(), st.ToString()));
    }
    return st;
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, kShortTimeout + kSlack);
  const std::string victim = absl::StrFormat("rank %d", c.victim);
  int naming = 0;
  for (int q = 0; q < c.size; ++q) {
    if (q == c.victim) continue;
    EXPECT_FALSE(statuses[q].ok()) << "rank " << q << " returned OK";
    naming += std::string(statuses[q].message()).find(victim) != std::string::npos;
  }
  EXPECT_GE(naming, 1) << "no survivor named " << victim
                       << "; first: " << herd::testing::FirstError(statuses);
}

INSTANTIATE_TEST_SUITE_P(Sparse, SparseKillTest, ::testing::Range(0, 5),
                         [](const auto& info) { return kKillCases[info.param].name; });

TEST(SparseFailureTest, RanksDisagreeingOnTheCountFail) {
  for (Op op : kOps) {
    auto statuses = RunRanksWithFabric(3, [&](Communicator& comm, LoopbackFabric&) {
      // Rank 1's blocks are longer: its indices overrun its peers' blocks, or its frames
      // their buffers.
      std::vector<float> data(comm.rank() == 1 ? 60000 : 3000), residual(data.size(), 0.0f);
      for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i % 101);
      SparseAllReduceOptions o;
      o.comm = &comm;
      o.data = data.data();
      o.residual = residual.data();
      o.count = data.size();
      o.density = 0.1;
      o.timeout = kShortTimeout;
      return op(o);
    });
    bool named = false;
    for (const absl::Status& s : statuses) {
      EXPECT_FALSE(s.ok());
      if (s.code() == absl::StatusCode::kInvalidArgument ||
          s.code() == absl::StatusCode::kOutOfRange) {
        named = named || std::string(s.message()).find("rank") != std::string::npos;
      }
    }
    EXPECT_TRUE(named) << herd::testing::FirstError(statuses);
  }
}

// Two operations at once on one communicator, told apart by their tags.
TEST(SparseFailureTest, ConcurrentOperationsWithDifferentTags) {
  constexpr size_t kCount = 30011;
  auto statuses = RunRanksWithFabric(4, [&](Communicator& comm, LoopbackFabric&) -> absl::Status {
    std::vector<float> a(kCount), ra(kCount, 0.0f), b(kCount), rb(kCount, 0.0f);
    for (size_t i = 0; i < kCount; ++i) {
      a[i] = Gradient(Inputs::kRandom, comm.rank(), 0, i);
      b[i] = Gradient(Inputs::kRandom, comm.rank(), 1, i);
    }
    auto options = [&](float* d, float* r, uint32_t tag) {
      SparseAllReduceOptions o;
      o.comm = &comm;
      o.data = d;
      o.residual = r;
      o.count = kCount;
      o.tag = tag;
      o.timeout = kTimeout;
      return o;
    };
    absl::Status other;
    std::thread t([&] { other = TopkAllGatherAllReduce(options(b.data(), rb.data(), 2)); });
    absl::Status mine = SparDLAllReduce(options(a.data(), ra.data(), 1));
    t.join();
    if (!mine.ok()) return mine;
    return other;
  });
  EXPECT_TRUE(herd::testing::FirstError(statuses).ok()) << herd::testing::FirstError(statuses);
}

}  // namespace
}  // namespace herd::sparse::testing
