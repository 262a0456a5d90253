// SparDL and TopA over the UCX backend, four real processes, messages of varying length on a
// real transport. Each process writes what it saw (input, result, residual per call) to a
// file; the parent loads every rank's files and runs the invariant checks of the unit tests
// (tests/unit/sparse/sparse_test_util.h) on them.

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "algorithms/sparse/sparse_allreduce.h"
#include "tests/integration/process_ranks.h"
#include "tests/unit/sparse/sparse_test_util.h"

namespace herd::sparse::testing {
namespace {

constexpr int kRanks = 4;
constexpr int kCalls = 2;

std::string FileOf(const std::string& dir, int call, int rank) {
  return absl::StrFormat("%s/call%d_rank%d.bin", dir, call, rank);
}

absl::Status WriteFloats(std::FILE* f, const std::vector<float>& v) {
  if (std::fwrite(v.data(), sizeof(float), v.size(), f) != v.size()) {
    return absl::InternalError("short write");
  }
  return absl::OkStatus();
}

// The child: c.calls calls with the residual carried over, each call's vectors to a file.
absl::Status RunAndRecord(transport::Communicator& comm, const Case& c, const std::string& dir) {
  const int q = comm.rank();
  std::vector<float> data(c.count), residual(c.count, 0.0f), input(c.count);
  BsagState bsag;
  for (int call = 0; call < c.calls; ++call) {
    for (size_t i = 0; i < c.count; ++i) {
      data[i] = Gradient(c.inputs, q, call, i);
      input[i] = data[i] + residual[i];
    }
    SparseAllReduceOptions o;
    o.comm = &comm;
    o.data = data.data();
    o.residual = residual.data();
    o.count = c.count;
    o.density = c.density;
    o.teams = c.teams;
    o.sag = c.sag;
    o.bsag = &bsag;
    o.timeout = kTimeout;
    absl::Status st = c.algo == Algo::kSparDL ? SparDLAllReduce(o) : TopkAllGatherAllReduce(o);
    if (!st.ok()) return st;
    std::FILE* f = std::fopen(FileOf(dir, call, q).c_str(), "wb");
    if (f == nullptr) return absl::InternalError("cannot open the record file");
    st = WriteFloats(f, input);
    if (st.ok()) st = WriteFloats(f, data);
    if (st.ok()) st = WriteFloats(f, residual);
    std::fclose(f);
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

void CheckOverUcx(const Case& c) {
  SCOPED_TRACE(Describe(c));
  char templ[] = "/tmp/herd-sparse-ucx-XXXXXX";
  ASSERT_NE(mkdtemp(templ), nullptr);
  const std::string dir = templ;
  herd::testing::ProcessRanksOptions options;
  options.size = c.ranks;
  options.timeout = std::chrono::seconds(120);
  auto outcomes = herd::testing::RunProcessRanks(
      options, [&](transport::Communicator& comm, herd::testing::ParentChannel&) {
        return RunAndRecord(comm, c, dir);
      });
  bool all_ok = true;
  for (const auto& o : outcomes) {
    EXPECT_TRUE(o.exited && o.exit_code == 0 && o.status.ok()) << o.Describe();
    all_ok = all_ok && o.exited && o.exit_code == 0;
  }
  for (int call = 0; all_ok && call < c.calls; ++call) {
    SCOPED_TRACE(absl::StrFormat("call %d", call));
    CallRecord r;
    for (int q = 0; q < c.ranks; ++q) {
      std::vector<float> in(c.count), res(c.count), out(c.count);
      std::FILE* f = std::fopen(FileOf(dir, call, q).c_str(), "rb");
      ASSERT_NE(f, nullptr);
      ASSERT_EQ(std::fread(in.data(), sizeof(float), c.count, f), c.count);
      ASSERT_EQ(std::fread(out.data(), sizeof(float), c.count, f), c.count);
      ASSERT_EQ(std::fread(res.data(), sizeof(float), c.count, f), c.count);
      std::fclose(f);
      r.input.push_back(std::move(in));
      r.result.push_back(std::move(out));
      r.residual.push_back(std::move(res));
    }
    EXPECT_TRUE(SameOnEveryRank(r));
    EXPECT_TRUE(NothingLost(r));
    EXPECT_TRUE(OutsideSupportKeepsInput(r));
    if (c.algo == Algo::kSparDL) {
      EXPECT_TRUE(BlocksWithinK(r, BlockElements(c), BlockK(c), c.sag != SagAlgorithm::kBruck));
      EXPECT_TRUE(OwnerKeepsNothing(r, c));
    } else {
      EXPECT_TRUE(ResidualIsAllOrNothing(r, BlockK(c), true));
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

Case Make(Algo algo, int teams, SagAlgorithm sag) {
  Case c;
  c.algo = algo;
  c.ranks = kRanks;
  c.count = 300007;
  c.density = 0.01;
  c.teams = teams;
  c.sag = sag;
  c.calls = kCalls;
  return c;
}

TEST(SparseUcxTest, SparDL) { CheckOverUcx(Make(Algo::kSparDL, 1, SagAlgorithm::kAuto)); }
TEST(SparseUcxTest, SparDLWithRsag) {
  CheckOverUcx(Make(Algo::kSparDL, 2, SagAlgorithm::kRecursive));
}
TEST(SparseUcxTest, SparDLWithBsag) { CheckOverUcx(Make(Algo::kSparDL, 4, SagAlgorithm::kBruck)); }
TEST(SparseUcxTest, TopA) { CheckOverUcx(Make(Algo::kTopA, 1, SagAlgorithm::kAuto)); }

}  // namespace
}  // namespace herd::sparse::testing
