// D_FP_S, threads as ranks, for both exchanges: the closed forms bit for bit (whole model:
// x_i' = (x_i + sum_j x_j) / (d + 1); halves: each half averaged with the neighbour it came
// from), the global mean kept at every step (ring and random), convergence to it, the exact
// peers used, and the options refused before anything is sent.

#include "algorithms/decentralized/full_precision.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "absl/strings/str_format.h"
#include "common/half.h"
#include "common/status.h"
#include "plan/topology.h"
#include "tests/support/spawn.h"
#include "tests/unit/decentralized/recording_communicator.h"

namespace herd::decentralized {
namespace {

using herd::plan::PeersForIteration;
using herd::plan::Topology;
using herd::plan::TopologyName;
using herd::testing::FirstError;
using herd::testing::SpawnRanks;

constexpr std::chrono::milliseconds kTimeout{std::chrono::seconds(30)};

std::vector<std::vector<float>> Models(int P, size_t count, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<std::vector<float>> x(P, std::vector<float>(count));
  for (auto& m : x) {
    for (float& v : m) v = dist(gen);
  }
  return x;
}

// One D_FP_S step on every rank, with the plan's peers of `iteration`; the 64-byte segments make
// even short vectors span many segments (and the window wrap).
absl::Status Step(std::vector<std::vector<float>>& x, Topology t, int64_t iteration,
                  Exchange exchange, size_t segment_bytes = 64) {
  const int P = static_cast<int>(x.size());
  return FirstError(SpawnRanks(P, [&](transport::Communicator& comm) {
    DecentralizedFullPrecisionOptions o;
    o.comm = &comm;
    o.tag = 3;
    o.timeout = kTimeout;
    o.data = x[comm.rank()].data();
    o.count = x[comm.rank()].size();
    o.peers = PeersForIteration(t, P, /*seed=*/11, iteration, comm.rank());
    o.exchange = exchange;
    o.segment_bytes = segment_bytes;
    return DecentralizedFullPrecision(o);
  }));
}

const char* Name(Exchange e) { return e == Exchange::kHalves ? "halves" : "whole model"; }

// Rank r's model after one step, computed directly from everyone's models before it.
std::vector<float> ClosedForm(const std::vector<std::vector<float>>& x, int r,
                              const std::vector<int>& peers, Exchange exchange) {
  const int P = static_cast<int>(x.size());
  const size_t count = x[r].size();
  std::vector<float> want = x[r];
  if (peers.empty()) return want;
  if (exchange == Exchange::kHalves && peers.size() == 2) {
    // The successor is the nearer peer going up the ranks, modulo P.
    const int succ = (peers[0] - r + P) % P < (peers[1] - r + P) % P ? peers[0] : peers[1];
    const int pred = succ == peers[0] ? peers[1] : peers[0];
    const size_t half = (count + 1) / 2;
    for (size_t e = 0; e < count; ++e) {
      const int from = e < half ? pred : succ;
      want[e] = (x[r][e] + x[from][e]) * 0.5f;
    }
    return want;
  }
  const float weight = static_cast<float>(1.0 / (peers.size() + 1));
  for (size_t e = 0; e < count; ++e) {
    float v = x[r][e];
    for (int q : peers) v += x[q][e];
    want[e] = v * weight;
  }
  return want;
}

TEST(DecentralizedFullPrecisionTest, MatchesTheClosedFormBitForBit) {
  for (Exchange exchange : {Exchange::kWholeModel, Exchange::kHalves}) {
    for (Topology t : {Topology::kRing, Topology::kRandom}) {
      for (int P = 1; P <= 8; ++P) {
        for (size_t count : {size_t{0}, size_t{1}, size_t{2}, size_t(P + 1), size_t{1000}}) {
          auto x = Models(P, count, 100 + P);
          std::vector<std::vector<float>> want(P);
          for (int r = 0; r < P; ++r) {
            want[r] = ClosedForm(x, r, PeersForIteration(t, P, 11, 4, r), exchange);
          }
          ASSERT_TRUE(Step(x, t, 4, exchange).ok());
          for (int r = 0; r < P; ++r) {
            EXPECT_EQ(x[r], want[r]) << Name(exchange) << " " << TopologyName(t) << " P=" << P
                                     << " count=" << count << " rank " << r;
          }
        }
      }
    }
  }
}

// The mixing matrix of the ring and of a random pairing is doubly stochastic: every step keeps
// the sum over ranks (up to the rounding of that step: the float weight 1/3 is not exact, so
// the mean may drift by an ulp or so per step), and repeated steps reach the mean everywhere.
TEST(DecentralizedFullPrecisionTest, KeepsTheGlobalMeanAndConvergesToIt) {
  for (Exchange exchange : {Exchange::kWholeModel, Exchange::kHalves}) {
    for (Topology t : {Topology::kRing, Topology::kRandom}) {
      for (int P : {2, 3, 5, 8}) {
        const size_t count = 257;
        auto x = Models(P, count, 7);
        auto mean_of = [&](size_t e) {
          double m = 0.0;
          for (auto& model : x) m += double(model[e]) / P;
          return m;
        };
        std::vector<double> mean0(count);
        for (size_t e = 0; e < count; ++e) mean0[e] = mean_of(e);
        for (int64_t it = 0; it < 150; ++it) {
          std::vector<double> before(count);
          for (size_t e = 0; e < count; ++e) before[e] = mean_of(e);
          ASSERT_TRUE(Step(x, t, it, exchange, 1 << 20).ok());
          for (size_t e = 0; e < count; ++e) {
            ASSERT_NEAR(mean_of(e), before[e], 2e-7 * (1 + std::fabs(before[e])))
                << Name(exchange) << " " << TopologyName(t) << " P=" << P << " it=" << it;
          }
        }
        for (auto& m : x) {
          for (size_t e = 0; e < count; ++e) {
            EXPECT_NEAR(m[e], mean0[e], 2e-5)
                << Name(exchange) << " " << TopologyName(t) << " P=" << P;
          }
        }
      }
    }
  }
}

TEST(DecentralizedFullPrecisionTest, Fp64AndBf16Average) {
  const int P = 3;  // ring of 3, whole model: everyone averages all three
  std::vector<std::vector<double>> x = {{1.0, 4.0}, {2.0, 5.0}, {6.0, 0.0}};
  std::vector<std::vector<uint16_t>> h(P);
  for (int r = 0; r < P; ++r) {
    for (double v : x[r]) h[r].push_back(FloatToBF16(float(v)));
  }
  auto st = FirstError(SpawnRanks(P, [&](transport::Communicator& comm) {
    DecentralizedFullPrecisionOptions o;
    o.comm = &comm;
    o.count = 2;
    o.peers = PeersForIteration(Topology::kRing, P, 0, 0, comm.rank());
    o.exchange = Exchange::kWholeModel;
    o.dtype = DType::kFloat64;
    o.data = x[comm.rank()].data();
    HERD_RETURN_IF_ERROR(DecentralizedFullPrecision(o));
    o.dtype = DType::kBFloat16;
    o.data = h[comm.rank()].data();
    return DecentralizedFullPrecision(o);
  }));
  ASSERT_TRUE(st.ok()) << st;
  for (int r = 0; r < P; ++r) {
    EXPECT_EQ(x[r], (std::vector<double>{3.0, 3.0}));
    EXPECT_EQ(BF16ToFloat(h[r][0]), 3.0f);
    EXPECT_EQ(BF16ToFloat(h[r][1]), 3.0f);
  }
}

// Every rank talks to exactly the peers it was given: the ones of this iteration's plan (with
// the default exchange, halves: a ring rank sends to and receives from both neighbours).
TEST(DecentralizedFullPrecisionTest, ExchangesWithExactlyTheGivenPeers) {
  for (Topology t : {Topology::kRing, Topology::kRandom}) {
    for (int P : {2, 5, 8}) {
      std::vector<std::set<int>> sent(P), received(P);
      auto st = FirstError(SpawnRanks(P, [&](transport::Communicator& inner) {
        testing::RecordingCommunicator comm(inner);
        std::vector<float> data(1000, float(inner.rank()));
        DecentralizedFullPrecisionOptions o;
        o.comm = &comm;
        o.data = data.data();
        o.count = data.size();
        o.peers = PeersForIteration(t, P, 3, 12, inner.rank());
        o.segment_bytes = 512;
        HERD_RETURN_IF_ERROR(DecentralizedFullPrecision(o));
        sent[inner.rank()] = comm.sent_to();
        received[inner.rank()] = comm.received_from();
        return absl::OkStatus();
      }));
      ASSERT_TRUE(st.ok()) << st;
      for (int r = 0; r < P; ++r) {
        const auto peers = PeersForIteration(t, P, 3, 12, r);
        const std::set<int> want(peers.begin(), peers.end());
        EXPECT_EQ(sent[r], want) << TopologyName(t) << " P=" << P << " rank " << r;
        EXPECT_EQ(received[r], want) << TopologyName(t) << " P=" << P << " rank " << r;
      }
    }
  }
}

TEST(DecentralizedFullPrecisionTest, BadOptionsAreRefusedBeforeAnythingIsSent) {
  auto statuses = SpawnRanks(4, [](transport::Communicator& inner) {
    testing::RecordingCommunicator comm(inner);
    std::vector<float> data(10, 1.0f);
    const int r = inner.rank();
    const int a = (r + 1) % 4, b = (r + 2) % 4;
    // Self, out of range, duplicated, descending.
    const std::vector<std::vector<int>> bad = {
        {r}, {-1}, {4}, {a, a}, {std::max(a, b), std::min(a, b)}};
    for (const auto& peers : bad) {
      DecentralizedFullPrecisionOptions o;
      o.comm = &comm;
      o.data = data.data();
      o.count = data.size();
      o.peers = peers;
      if (auto st = DecentralizedFullPrecision(o);
          st.code() != absl::StatusCode::kInvalidArgument) {
        return absl::InternalError("peers accepted: " + st.ToString());
      }
    }
    DecentralizedFullPrecisionOptions o;
    o.comm = &comm;
    o.dtype = DType::kInt32;
    o.data = data.data();
    o.count = 2;
    o.peers = {(r + 1) % 4};
    if (DecentralizedFullPrecision(o).code() != absl::StatusCode::kInvalidArgument) {
      return absl::InternalError("int32 accepted");
    }
    if (comm.sends() + comm.recvs() != 0) return absl::InternalError("something was posted");
    return absl::OkStatus();
  });
  ASSERT_TRUE(FirstError(statuses).ok()) << FirstError(statuses);
}

}  // namespace
}  // namespace herd::decentralized
