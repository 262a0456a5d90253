#include "tests/unit/sparse/sparse_test_util.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>

#include "absl/strings/str_format.h"
#include "tests/support/spawn.h"

namespace herd::sparse::testing {
namespace {

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint32_t Bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

const char* AlgoName(Algo a) { return a == Algo::kSparDL ? "spardl" : "topa"; }
const char* InputsName(Inputs i) {
  return i == Inputs::kRandom ? "random" : i == Inputs::kTies ? "ties" : "sparse";
}

}  // namespace

std::string Describe(const Case& c) {
  return absl::StrFormat("%s P=%d count=%u density=%g teams=%d sag=%s topk=%s inputs=%s",
                         AlgoName(c.algo), c.ranks, c.count, c.density, c.teams,
                         SagAlgorithmName(c.sag), TopkMethodName(c.topk), InputsName(c.inputs));
}

float Gradient(Inputs inputs, int rank, int call, size_t i) {
  const uint64_t h = Mix((uint64_t(rank) << 48) ^ (uint64_t(call) << 40) ^ i);
  // Uniform in [-1, 1) on 24 bits, times 2^-4 .. 2^3: magnitudes spread over several scales.
  const float u = static_cast<float>(static_cast<int32_t>((h >> 40) & 0xffffff) - (1 << 23)) /
                  static_cast<float>(1 << 23);
  const float random = std::ldexp(u, static_cast<int>((h >> 8) % 8) - 4);
  switch (inputs) {
    case Inputs::kRandom:
      return random;
    case Inputs::kTies:
      return static_cast<float>(static_cast<int>(h % 7) - 3);
    case Inputs::kSparse:
      return h % 53 == 0 ? random : 0.0f;
  }
  return 0;
}

size_t BlockElements(const Case& c) {
  if (c.algo == Algo::kTopA) return c.count;
  const size_t team = static_cast<size_t>(c.ranks / c.teams);
  return (c.count + team - 1) / team;
}

size_t BlockK(const Case& c) { return sparse::BlockK(BlockElements(c), c.density); }

absl::StatusOr<std::vector<CallRecord>> RunCalls(const Case& c) {
  const int P = c.ranks;
  std::vector<CallRecord> records(c.calls);
  for (CallRecord& r : records) {
    r.input.resize(P);
    r.result.resize(P);
    r.residual.resize(P);
  }
  auto statuses = herd::testing::SpawnRanks(P, [&](transport::Communicator& comm) {
    const int q = comm.rank();
    std::vector<float> data(c.count), residual(c.count, 0.0f);
    BsagState bsag;
    for (int call = 0; call < c.calls; ++call) {
      CallRecord& rec = records[call];
      rec.input[q].resize(c.count);
      for (size_t i = 0; i < c.count; ++i) {
        data[i] = Gradient(c.inputs, q, call, i);
        rec.input[q][i] = data[i] + residual[i];
      }
      SparseAllReduceOptions o;
      o.comm = &comm;
      o.tag = 7;
      o.timeout = kTimeout;
      o.data = data.data();
      o.residual = residual.data();
      o.count = c.count;
      o.density = c.density;
      o.teams = c.teams;
      o.sag = c.sag;
      o.topk = c.topk;
      o.bsag = &bsag;
      absl::Status st = c.algo == Algo::kSparDL ? SparDLAllReduce(o) : TopkAllGatherAllReduce(o);
      if (!st.ok()) {
        return absl::Status(st.code(), absl::StrFormat("call %d: %s", call, st.message()));
      }
      rec.result[q] = data;
      rec.residual[q] = residual;
    }
    return absl::OkStatus();
  });
  if (absl::Status st = herd::testing::FirstError(statuses); !st.ok()) return st;
  return records;
}

::testing::AssertionResult SameOnEveryRank(const CallRecord& r) {
  for (size_t q = 1; q < r.result.size(); ++q) {
    for (size_t i = 0; i < r.result[0].size(); ++i) {
      if (Bits(r.result[q][i]) != Bits(r.result[0][i])) {
        return ::testing::AssertionFailure() << "element " << i << ": rank " << q << " has "
                                             << r.result[q][i] << ", rank 0 " << r.result[0][i];
      }
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult BlocksWithinK(const CallRecord& r, size_t block, size_t bound,
                                         bool exact) {
  const std::vector<float>& res = r.result[0];
  for (size_t begin = 0; begin < res.size(); begin += block) {
    const size_t end = std::min(res.size(), begin + block);
    size_t nonzeros = 0;
    for (size_t i = begin; i < end; ++i) nonzeros += res[i] != 0;
    // Where k covers the whole block, a reduced value that rounds to exactly 0 is (rightly)
    // not selected, so only blocks longer than k must be full.
    if (nonzeros > bound || (exact && end - begin > bound && nonzeros != bound)) {
      return ::testing::AssertionFailure()
             << "block [" << begin << ", " << end << ") holds " << nonzeros << " non-zeros; k is "
             << bound << (exact ? " (exactly k expected)" : " (at most)");
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult NothingLost(const CallRecord& r) {
  const size_t P = r.input.size();
  for (size_t i = 0; i < r.result[0].size(); ++i) {
    double in = 0, out = double(P) * r.result[0][i], scale = double(P) * std::fabs(r.result[0][i]);
    for (size_t q = 0; q < P; ++q) {
      in += r.input[q][i];
      out += r.residual[q][i];
      scale += std::fabs(r.input[q][i]) + std::fabs(r.residual[q][i]);
    }
    // Each value passes through at most a few dozen fp32 roundings (2^-24 each).
    if (std::fabs(in - out) > 1e-5 * scale) {
      return ::testing::AssertionFailure()
             << "element " << i << ": inputs sum to " << in << " but P * result + residuals to "
             << out << " (result " << r.result[0][i] << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult OutsideSupportKeepsInput(const CallRecord& r) {
  for (size_t i = 0; i < r.result[0].size(); ++i) {
    if (r.result[0][i] != 0) continue;
    for (size_t q = 0; q < r.input.size(); ++q) {
      if (Bits(r.residual[q][i]) != Bits(r.input[q][i])) {
        return ::testing::AssertionFailure()
               << "element " << i << " is outside the support, but rank " << q << "'s residual is "
               << r.residual[q][i] << ", its input " << r.input[q][i];
      }
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult OwnerKeepsNothing(const CallRecord& r, const Case& c) {
  const size_t block = BlockElements(c);
  const int Q = c.ranks / c.teams;
  for (size_t i = 0; i < r.result[0].size(); ++i) {
    if (r.result[0][i] == 0) continue;
    const int b = static_cast<int>(i / block);
    bool zero = false;
    std::string seen;
    for (int t = 0; t < c.teams; ++t) {
      const float v = r.residual[t * Q + b][i];
      zero = zero || v == 0;
      seen += absl::StrFormat(" rank %d: %g", t * Q + b, v);
    }
    if (!zero) {
      return ::testing::AssertionFailure() << "element " << i << " of block " << b
                                           << " is selected, but no owner's residual is 0:" << seen;
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult ResidualIsAllOrNothing(const CallRecord& r, size_t k, bool exact) {
  for (size_t q = 0; q < r.input.size(); ++q) {
    size_t delivered = 0, nonzeros = 0;
    for (size_t i = 0; i < r.input[q].size(); ++i) {
      const float x = r.input[q][i], res = r.residual[q][i];
      nonzeros += x != 0;
      if (res == 0 && x != 0) {
        ++delivered;
      } else if (Bits(res) != Bits(x)) {
        return ::testing::AssertionFailure() << "rank " << q << " element " << i << ": residual "
                                             << res << " is neither 0 nor the input " << x;
      }
    }
    if (delivered > k || (exact && delivered != std::min(k, nonzeros))) {
      return ::testing::AssertionFailure()
             << "rank " << q << " delivered " << delivered << " entries, k is " << k;
    }
  }
  return ::testing::AssertionSuccess();
}

std::vector<absl::Status> RunRanksWithFabric(
    int size,
    const std::function<absl::Status(transport::Communicator&, transport::LoopbackFabric&)>& fn) {
  auto fabric = transport::LoopbackFabric::Create(size);
  std::vector<std::unique_ptr<transport::Communicator>> comms;
  for (int r = 0; r < size; ++r) comms.push_back(fabric->communicator(r));
  std::vector<absl::Status> statuses(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] { statuses[r] = fn(*comms[r], *fabric); });
  }
  for (auto& t : threads) t.join();
  return statuses;
}

void ExpectInvariants(const Case& c) {
  SCOPED_TRACE(Describe(c));
  auto records = RunCalls(c);
  ASSERT_TRUE(records.ok()) << records.status();
  const bool random_exact = c.topk == TopkMethod::kExact && c.inputs == Inputs::kRandom;
  // B-SAG's gathered sum may hold fewer than k entries; R-SAG's union never does.
  const bool bsag = c.teams > 1 && (c.sag == SagAlgorithm::kBruck ||
                                    (c.sag == SagAlgorithm::kAuto && (c.teams & (c.teams - 1))));
  for (int call = 0; call < c.calls; ++call) {
    SCOPED_TRACE(absl::StrFormat("call %d", call));
    const CallRecord& r = (*records)[call];
    EXPECT_TRUE(SameOnEveryRank(r));
    EXPECT_TRUE(NothingLost(r));
    if (c.algo == Algo::kSparDL) {
      EXPECT_TRUE(BlocksWithinK(r, BlockElements(c), BlockK(c), random_exact && !bsag));
      EXPECT_TRUE(OutsideSupportKeepsInput(r));
      EXPECT_TRUE(OwnerKeepsNothing(r, c));
    } else {
      EXPECT_TRUE(BlocksWithinK(r, std::max<size_t>(c.count, 1), c.ranks * BlockK(c), false));
      EXPECT_TRUE(ResidualIsAllOrNothing(r, BlockK(c), random_exact));
      // Ties cancel exactly: a selected index may sum to 0, and then it looks unsupported.
      if (c.inputs != Inputs::kTies) {
        EXPECT_TRUE(OutsideSupportKeepsInput(r));
      }
    }
  }
}

}  // namespace herd::sparse::testing
