// C_LP_S (centralized low precision with error compensation), threads as ranks: nothing is
// lost between the inputs, the residuals and the result; every rank ends bitwise identical;
// without residuals the result is exactly Q(sum Q(x_j)); bad options and bad peer payloads
// are refused.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <mutex>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "algorithms/lowprec/centralized_low_precision.h"
#include "tests/support/spawn.h"
#include "tests/unit/collectives/forwarding_communicator.h"
#include "tests/unit/compression/compression_test_util.h"

namespace herd::lowprec {
namespace {

using collectives::ChunkBegin;
using collectives::ChunkSize;
using compression::Compressor;
using compression::testing::Gaussian;
using compression::testing::Parsed;
using herd::testing::FirstError;
using herd::testing::SpawnRanks;

constexpr std::chrono::milliseconds kTimeout{std::chrono::seconds(30)};

// Every rank's state of one run: input/result, residuals.
struct Ranks {
  Ranks(int P, size_t count)
      : data(P),
        delta(P, std::vector<float>(count, 0.0f)),
        epsilon(P, std::vector<float>(count, 0.0f)) {}
  std::vector<std::vector<float>> data, delta, epsilon;
};

absl::Status RunAll(Ranks& s, size_t count, Compressor c, bool average, uint64_t seed,
                    bool feedback = true, std::vector<LowPrecisionWorkspace>* workspaces = nullptr,
                    const std::vector<std::string>& hosts = {}) {
  const int P = static_cast<int>(s.data.size());
  std::vector<std::string> labels = hosts;
  labels.resize(P);
  return FirstError(herd::testing::SpawnRanksOnHosts(labels, [&](transport::Communicator& comm) {
    const int r = comm.rank();
    CentralizedLowPrecisionOptions o;
    o.workspace = workspaces != nullptr ? &(*workspaces)[r] : nullptr;
    o.comm = &comm;
    o.tag = 7;
    o.timeout = kTimeout;
    o.data = s.data[r].data();
    o.count = count;
    o.compressor = c;
    o.delta = feedback ? s.delta[r].data() : nullptr;
    o.epsilon = feedback ? s.epsilon[r].data() : nullptr;
    o.average = average;
    o.seed = seed;
    return CentralizedLowPrecisionAllReduce(o);
  }));
}

// The books of one call, per element i (a = P with average, else 1):
//   sum_j (x_j + delta_j) + a eps_owner  ==  a result + sum_j delta_j' + a eps_owner'
void CheckNothingLost(int P, size_t count, Compressor c, bool average,
                      const std::vector<std::string>& hosts = {}) {
  SCOPED_TRACE(absl::StrFormat("P=%d count=%d %s %s hosts=%s", P, count, CompressorName(c),
                               average ? "avg" : "sum", absl::StrJoin(hosts, ",")));
  Ranks s(P, count);
  const double a = average ? P : 1;
  for (int iteration = 0; iteration < 3; ++iteration) {
    std::vector<double> before(count, 0.0), scale(count, 1.0);
    for (int r = 0; r < P; ++r) {
      s.data[r] = Gaussian(count, 1000 * iteration + r);
      for (size_t i = 0; i < count; ++i) {
        before[i] += double(s.data[r][i]) + s.delta[r][i];
        scale[i] += std::fabs(s.data[r][i]) + std::fabs(s.delta[r][i]);
      }
    }
    auto owner_eps = [&](size_t i) {
      for (int r = 0; r < P; ++r) {
        if (i >= ChunkBegin(count, P, r) && i < ChunkBegin(count, P, r + 1)) return s.epsilon[r][i];
      }
      return 0.0f;
    };
    for (size_t i = 0; i < count; ++i) before[i] += a * owner_eps(i);

    ASSERT_TRUE(RunAll(s, count, c, average, iteration, true, nullptr, hosts).ok());

    // Bit for bit (memcmp, not ==); an empty tensor's data() may be null, which memcmp must
    // not see.
    for (int r = 1; r < P && count > 0; ++r) {
      ASSERT_EQ(0, std::memcmp(s.data[r].data(), s.data[0].data(), count * sizeof(float)))
          << "rank " << r << " differs from rank 0";
    }
    for (size_t i = 0; i < count; ++i) {
      double after = a * s.data[0][i] + a * owner_eps(i);
      for (int r = 0; r < P; ++r) after += s.delta[r][i];
      ASSERT_NEAR(after, before[i], 1e-5 * (scale[i] + a * std::fabs(s.data[0][i])))
          << "element " << i << " iteration " << iteration;
    }
  }
}

class ClpsSweep : public ::testing::TestWithParam<int> {};

TEST_P(ClpsSweep, NothingIsLostAndAllRanksAgree) {
  const int P = GetParam();
  for (const char* name : {"minmax_uint8", "sign", "qsgd", "fp16", "bf16", "topk:0.1"}) {
    for (size_t count :
         {size_t{0}, size_t{1}, size_t(P - 1), size_t(P + 1), size_t{1000}, size_t{10007}}) {
      for (bool average : {false, true}) CheckNothingLost(P, count, Parsed(name), average);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Clps, ClpsSweep, ::testing::Range(1, 9),
                         [](const auto& info) { return absl::StrFormat("P%d", info.param); });

// Hosts of several ranks: the hierarchical form (full-precision reduce-scatter within a host,
// C_LP_S along the rails, all-gather within a host) keeps the same books: the rail member that
// sends a chunk's host sum holds its sender residual, the flat owner its reducer residual.
TEST(ClpsHierarchyTest, NothingIsLostAndAllRanksAgreeOnHostsOfSeveralRanks) {
  const std::vector<std::vector<std::string>> layouts = {{"a", "a", "b", "b"},
                                                         {"a", "b", "a", "b"},
                                                         {"a", "a", "a", "b", "b", "b"},
                                                         {"a", "a", "b", "b", "c", "c"}};
  for (const auto& hosts : layouts) {
    const int P = static_cast<int>(hosts.size());
    for (const char* name : {"minmax_uint8", "qsgd", "topk:0.1"}) {
      for (size_t count : {size_t{1}, size_t(P + 1), size_t{1000}, size_t{10007}}) {
        for (bool average : {false, true}) CheckNothingLost(P, count, Parsed(name), average, hosts);
      }
    }
  }
}

// Without residuals the result is exactly D(Q(sum_j D(Q(x_j)) / P)), chunk by chunk.
TEST(ClpsTest, WithoutFeedbackTheResultIsTheDoubleQuantisedAverage) {
  const int P = 5;
  const size_t count = 1003;
  const Compressor c = Compressor::kMinMaxUInt8;  // deterministic: the reference can recompute it
  Ranks s(P, count);
  for (int r = 0; r < P; ++r) s.data[r] = Gaussian(count, 50 + r);
  std::vector<float> want(count);
  std::string bytes;
  for (int owner = 0; owner < P; ++owner) {
    const size_t first = ChunkBegin(count, P, owner), n = ChunkSize(count, P, owner);
    std::vector<float> sum(n, 0.0f), decoded(n);
    for (int r = 0; r < P; ++r) {
      compression::Compress(c, std::span<const float>(s.data[r].data() + first, n), &bytes);
      ASSERT_TRUE(compression::DecompressAdd(c, bytes, sum).ok());
    }
    for (float& v : sum) v *= 1.0f / P;
    compression::Compress(c, sum, &bytes);
    ASSERT_TRUE(compression::Decompress(c, bytes, decoded).ok());
    std::copy(decoded.begin(), decoded.end(), want.begin() + first);
  }
  ASSERT_TRUE(RunAll(s, count, c, /*average=*/true, 0, /*feedback=*/false).ok());
  for (int r = 0; r < P; ++r) EXPECT_EQ(s.data[r], want) << "rank " << r;
}

// Error feedback makes the running sum of results track the running sum of true averages:
// the gap is what the residuals hold, bounded, instead of a growing random walk.
double RunningSumGap(bool feedback) {
  const int P = 4;
  const size_t count = 4096;
  Ranks s(P, count);
  std::vector<double> true_sum(count, 0.0), got_sum(count, 0.0);
  for (int it = 0; it < 60; ++it) {
    for (int r = 0; r < P; ++r) {
      s.data[r] = Gaussian(count, 7000 + 10 * it + r);
      for (size_t i = 0; i < count; ++i) true_sum[i] += s.data[r][i] / P;
    }
    EXPECT_TRUE(RunAll(s, count, Compressor::kSign, true, it, feedback).ok());
    for (size_t i = 0; i < count; ++i) got_sum[i] += s.data[0][i];
  }
  double worst = 0.0;
  for (size_t i = 0; i < count; ++i) worst = std::max(worst, std::fabs(got_sum[i] - true_sum[i]));
  return worst;
}

TEST(ClpsTest, FeedbackKeepsTheRunningSumOnTrack) {
  const double with = RunningSumGap(true), without = RunningSumGap(false);
  EXPECT_LT(with, 0.5 * without) << "with feedback " << with << ", without " << without;
}

// A reused workspace (growing and shrinking between calls) changes nothing in the results.
TEST(ClpsTest, AReusedWorkspaceGivesTheSameResults) {
  const int P = 3;
  std::vector<LowPrecisionWorkspace> workspaces(P);
  for (size_t count : {size_t{1000}, size_t{10}, size_t{5000}, size_t{2}}) {
    for (const char* name : {"minmax_uint8", "topk:0.1"}) {
      Ranks fresh(P, count), reused(P, count);
      for (int it = 0; it < 2; ++it) {
        for (int r = 0; r < P; ++r) fresh.data[r] = reused.data[r] = Gaussian(count, 90 + it + r);
        ASSERT_TRUE(RunAll(fresh, count, Parsed(name), true, it).ok());
        ASSERT_TRUE(RunAll(reused, count, Parsed(name), true, it, true, &workspaces).ok());
        EXPECT_EQ(fresh.data, reused.data) << name << " count " << count;
        EXPECT_EQ(fresh.delta, reused.delta) << name << " count " << count;
        EXPECT_EQ(fresh.epsilon, reused.epsilon) << name << " count " << count;
      }
    }
  }
}

TEST(ClpsTest, BadOptionsAreRefusedBeforeAnythingIsSent) {
  auto statuses = SpawnRanks(2, [](transport::Communicator& inner) {
    collectives::testing::ForwardingCommunicator comm(inner);
    std::vector<float> data(10, 1.0f);
    CentralizedLowPrecisionOptions o;
    o.comm = &comm;
    o.data = data.data();
    o.count = data.size();
    o.dtype = DType::kFloat64;
    absl::Status fp64 = CentralizedLowPrecisionAllReduce(o);
    o.dtype = DType::kFloat32;
    o.data = nullptr;
    absl::Status null = CentralizedLowPrecisionAllReduce(o);
    o.data = data.data();
    o.tag = 1u << 21;
    absl::Status tag = CentralizedLowPrecisionAllReduce(o);
    for (const absl::Status& st : {fp64, null, tag}) {
      if (st.code() != absl::StatusCode::kInvalidArgument) {
        return absl::InternalError("expected INVALID_ARGUMENT, got " + st.ToString());
      }
    }
    if (comm.sends() + comm.recvs() != 0) return absl::InternalError("something was posted");
    return absl::OkStatus();
  });
  ASSERT_TRUE(FirstError(statuses).ok()) << FirstError(statuses);
}

// Rank 1 corrupts the header of every compressed chunk it sends in the all-to-all: its peers
// refuse the payload naming it, and nobody hangs.
class CorruptingCommunicator : public collectives::testing::ForwardingCommunicator {
 public:
  using ForwardingCommunicator::ForwardingCommunicator;
  transport::Request isend(int peer, transport::Tag tag, ConstBytes buf) override {
    if (tag.kind != transport::OpKind::kAllToAll || buf.size() < sizeof(float)) {
      return ForwardingCommunicator::isend(peer, tag, buf);
    }
    std::lock_guard<std::mutex> lock(mu_);
    std::string& copy = copies_.emplace_back(reinterpret_cast<const char*>(buf.data()), buf.size());
    const float nan = std::nanf("");
    std::memcpy(copy.data(), &nan, sizeof nan);
    return ForwardingCommunicator::isend(peer, tag, AsBytes(copy.data(), copy.size()));
  }

 private:
  std::mutex mu_;
  std::deque<std::string> copies_;  // alive until the communicator goes
};

TEST(ClpsTest, APeersUndecodablePayloadIsRefusedNamingIt) {
  const int P = 3;
  const size_t count = 30;
  auto statuses = SpawnRanks(P, [&](transport::Communicator& inner) {
    CorruptingCommunicator corrupting(inner);
    transport::Communicator& comm = inner.rank() == 1 ? corrupting : inner;
    std::vector<float> data = Gaussian(count, 3);
    CentralizedLowPrecisionOptions o;
    o.comm = &comm;
    o.timeout = std::chrono::seconds(10);
    o.data = data.data();
    o.count = count;
    return CentralizedLowPrecisionAllReduce(o);
  });
  for (int r : {0, 2}) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kInvalidArgument) << statuses[r];
    EXPECT_NE(statuses[r].message().find("rank 1 sent"), absl::string_view::npos) << statuses[r];
  }
  EXPECT_FALSE(statuses[1].ok());
}

}  // namespace
}  // namespace herd::lowprec
