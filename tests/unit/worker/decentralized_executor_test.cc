// The executors of the decentralized and low-precision modes over threads-as-ranks:
//  decentralized     every rank's parameters follow D-PSGD's closed form (average with the
//                    iteration's peers, half the model with each of two, then SGD with the
//                    local gradient), and the mean over
//                    ranks follows SGD on the mean gradient exactly;
//  decentralized_lp  the mean over ranks stays close to SGD on the mean gradient;
//  clps              every rank holds bitwise the same parameters, close to SGD on the mean
//                    gradient (error feedback keeps the compression error from accumulating);
// and the plans they refuse.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/status.h"
#include "plan/topology.h"
#include "tests/support/spawn.h"
#include "worker/executor.h"

namespace herd::worker {
namespace {

constexpr float kLr = 0.125f;
const std::vector<size_t> kCounts = {5, 100, 1, 33, 1000, 7};
constexpr int kIterations = 5;

// Rank r's gradient of element i of tensor t at iteration it: independent of the parameters,
// so the test can compute every rank's trajectory itself.
float Grad(int r, int it, int t, size_t i) {
  return static_cast<float>(static_cast<int>((r + 1) * (it + 2) + t * 3 + i % 11) % 17) * 0.5f;
}
// The decentralized modes start from different models (what they average); clps, like every
// centralized mode, from one model on every rank.
float Initial(int r, int t, size_t i) { return static_cast<float>(t) + 0.25f * (i % 7) + 0.5f * r; }
bool SameStart(const std::string& mode) { return mode == "clps"; }

// Params[it][r][t]: rank r's tensor t after iteration it.
using Model = std::vector<std::vector<float>>;
using Params = std::vector<std::vector<Model>>;

struct Case {
  std::string mode;
  int ranks;
  std::string topology = "ring";
  std::string compressor;
  size_t threshold = size_t{1} << 20;
  uint64_t seed = 9;
};

absl::Status RunRank(const Case& c, transport::Communicator& comm, Params* out, std::mutex* mu) {
  const int T = static_cast<int>(kCounts.size()), r = comm.rank();
  std::vector<std::vector<float>> params(T);
  ExecutorContext ctx;
  ctx.plan.mutable_mode()->set_mode(c.mode);
  ctx.plan.mutable_mode()->set_topology(c.topology);
  ctx.plan.mutable_mode()->set_compressor(c.compressor);
  ctx.plan.set_seed(c.seed);
  ctx.plan.set_world_size(comm.size());
  ctx.rank = r;
  ctx.comm = &comm;
  ctx.optimizer.learning_rate = kLr;
  ctx.fusion.threshold_bytes = c.threshold;
  ctx.timeout = std::chrono::seconds(30);
  for (int t = 0; t < T; ++t) {
    params[t].resize(kCounts[t]);
    for (size_t i = 0; i < kCounts[t]; ++i) params[t][i] = Initial(SameStart(c.mode) ? 0 : r, t, i);
    ctx.tensors.push_back({absl::StrFormat("t%d", t), params[t].data(), kCounts[t]});
  }
  HERD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> exec, MakeExecutor(ctx));
  for (int it = 0; it < kIterations; ++it) {
    HERD_RETURN_IF_ERROR(exec->BeginIteration(it));
    for (int t = 0; t < T; ++t) HERD_RETURN_IF_ERROR(exec->BeforeForward(t));
    for (int t = T - 1; t >= 0; --t) {
      std::vector<float> g(kCounts[t]);
      for (size_t i = 0; i < g.size(); ++i) g[i] = Grad(r, it, t, i);
      HERD_RETURN_IF_ERROR(exec->GradientReady(t, g));
    }
    HERD_RETURN_IF_ERROR(exec->EndBackward());
    HERD_RETURN_IF_ERROR(exec->Flush());
    std::lock_guard<std::mutex> lock(*mu);
    (*out)[it][r] = params;
  }
  return absl::OkStatus();
}

absl::StatusOr<Params> RunAll(const Case& c) {
  Params out(kIterations, std::vector<Model>(c.ranks));
  std::mutex mu;
  HERD_RETURN_IF_ERROR(testing::FirstError(testing::SpawnRanks(
      c.ranks, [&](transport::Communicator& comm) { return RunRank(c, comm, &out, &mu); })));
  return out;
}

// The mean over ranks of SGD on the mean gradient: what every averaging mode must keep.
float MeanSgd(int P, int iterations, int t, size_t i) {
  double p = 0;
  for (int r = 0; r < P; ++r) p += Initial(r, t, i) / double(P);
  for (int it = 0; it < iterations; ++it) {
    double g = 0;
    for (int r = 0; r < P; ++r) g += Grad(r, it, t, i) / double(P);
    p -= kLr * g;
  }
  return static_cast<float>(p);
}

std::string Name(const Case& c) {
  return absl::StrFormat("%s %s %s P=%d threshold=%d", c.mode, c.topology, c.compressor, c.ranks,
                         c.threshold);
}

TEST(DecentralizedExecutorTest, FollowsDpsgdAndKeepsTheMean) {
  for (const char* topology : {"ring", "random"}) {
    for (int P : {1, 2, 3, 4, 5}) {
      const Case c{"decentralized", P, topology, ""};
      SCOPED_TRACE(Name(c));
      auto got = RunAll(c);
      ASSERT_TRUE(got.ok()) << got.status();
      const auto t_topology = *plan::ParseTopology(topology);
      // The executor averages the tensors as one flat vector, with the default exchange
      // (halves): a rank with two peers averages the first half of the vector with its
      // predecessor and the second half with its successor.
      size_t total = 0;
      for (size_t n : kCounts) total += n;
      size_t offset = 0;  // of tensor t in the flat vector
      for (size_t t = 0; t < kCounts.size(); offset += kCounts[t], ++t) {
        for (size_t i = 0; i < kCounts[t]; ++i) {
          const bool first_half = offset + i < (total + 1) / 2;
          // Every rank's trajectory: x <- its average with its peers, then x -= lr g.
          std::vector<double> x(P);
          for (int r = 0; r < P; ++r) x[r] = Initial(r, int(t), i);
          for (int it = 0; it < kIterations; ++it) {
            std::vector<double> next(P);
            for (int r = 0; r < P; ++r) {
              const auto peers = plan::PeersForIteration(t_topology, P, 9, it, r);
              double avg = x[r];
              if (peers.size() == 2) {
                const bool first_is_successor = (peers[0] - r + P) % P < (peers[1] - r + P) % P;
                const int succ = first_is_successor ? peers[0] : peers[1];
                const int pred = first_is_successor ? peers[1] : peers[0];
                avg = (x[r] + x[first_half ? pred : succ]) / 2;
              } else {
                for (int q : peers) avg += x[q];
                avg /= double(peers.size() + 1);
              }
              next[r] = avg - kLr * Grad(r, it, int(t), i);
            }
            x = next;
            double mean = 0;
            for (int r = 0; r < P; ++r) {
              const float have = (*got)[it][r][t][i];
              ASSERT_NEAR(have, x[r], 1e-4 * (1 + std::fabs(x[r])))
                  << "rank " << r << " tensor " << t << " element " << i << " iteration " << it;
              mean += have / double(P);
            }
            const float want = MeanSgd(P, it + 1, int(t), i);
            ASSERT_NEAR(mean, want, 1e-4 * (1 + std::fabs(want))) << "the mean, iteration " << it;
          }
        }
      }
    }
  }
}

TEST(DecentralizedLpExecutorTest, TheMeanStaysCloseToSgd) {
  for (const char* compressor : {"minmax_uint8", "fp16"}) {
    for (int P : {1, 2, 3, 4}) {
      const Case c{"decentralized_lp", P, "ring", compressor};
      SCOPED_TRACE(Name(c));
      auto got = RunAll(c);
      ASSERT_TRUE(got.ok()) << got.status();
      // Each step adds the compression error of the differences (a few units of
      // range / 510 for minmax; fp16 is nearly exact for these values).
      const double tolerance = std::string(compressor) == "fp16" ? 2e-3 : 5e-2;
      for (int it = 0; it < kIterations; ++it) {
        for (size_t t = 0; t < kCounts.size(); ++t) {
          for (size_t i = 0; i < kCounts[t]; ++i) {
            double mean = 0;
            for (int r = 0; r < P; ++r) mean += (*got)[it][r][t][i] / double(P);
            ASSERT_NEAR(mean, MeanSgd(P, it + 1, int(t), i), tolerance)
                << "tensor " << t << " element " << i << " iteration " << it;
          }
        }
      }
    }
  }
}

TEST(ClpsExecutorTest, RanksAgreeBitwiseAndFollowSgd) {
  for (const char* compressor : {"minmax_uint8", "fp16", "sign"}) {
    for (int P : {1, 2, 3, 5}) {
      for (size_t threshold : {size_t{0}, size_t{256}, size_t{1} << 20}) {
        const Case c{"clps", P, "ring", compressor, threshold};
        SCOPED_TRACE(Name(c));
        auto got = RunAll(c);
        ASSERT_TRUE(got.ok()) << got.status();
        // sign's residuals hold several units of these gradients for a while (the sum of
        // what was sent still tracks them, error_feedback tests): only agreement is checked.
        const double tolerance = std::string(compressor) == "sign"   ? INFINITY
                                 : std::string(compressor) == "fp16" ? 2e-3
                                                                     : 5e-2;
        for (int it = 0; it < kIterations; ++it) {
          for (int r = 1; r < P; ++r) {
            ASSERT_EQ((*got)[it][r], (*got)[it][0]) << "rank " << r << " iteration " << it;
          }
          for (size_t t = 0; t < kCounts.size(); ++t) {
            for (size_t i = 0; i < kCounts[t]; ++i) {
              // SGD on the mean gradient from the common start.
              const double sgd =
                  MeanSgd(P, it + 1, int(t), i) - MeanSgd(P, 0, int(t), i) + Initial(0, int(t), i);
              ASSERT_NEAR((*got)[it][0][t][i], sgd, tolerance)
                  << "tensor " << t << " element " << i << " iteration " << it;
            }
          }
        }
      }
    }
  }
}

TEST(DecentralizedExecutorTest, RefusesPlansItCannotRun) {
  // decentralized_lp needs fixed peers: not the random topology.
  auto random_lp = RunAll(Case{"decentralized_lp", 3, "random", "minmax_uint8"});
  EXPECT_EQ(random_lp.status().code(), absl::StatusCode::kInvalidArgument) << random_lp.status();
  auto bad_compressor = RunAll(Case{"clps", 2, "ring", "zip"});
  EXPECT_EQ(bad_compressor.status().code(), absl::StatusCode::kInvalidArgument);
  auto bad_topology = RunAll(Case{"decentralized", 2, "star", ""});
  EXPECT_EQ(bad_topology.status().code(), absl::StatusCode::kInvalidArgument);

  // A plan whose published peers differ from the rule's.
  auto statuses = testing::SpawnRanks(3, [](transport::Communicator& comm) -> absl::Status {
    std::vector<float> p(4, 0.0f);
    ExecutorContext ctx;
    ctx.plan.mutable_mode()->set_mode("decentralized");
    ctx.plan.mutable_mode()->set_topology("ring");
    for (int r = 0; r < 3; ++r) ctx.plan.add_peers()->add_ranks((r + 1) % 3);  // right only
    ctx.rank = comm.rank();
    ctx.comm = &comm;
    ctx.tensors.push_back({"p", p.data(), p.size()});
    auto exec = MakeExecutor(ctx);
    if (exec.status().code() != absl::StatusCode::kFailedPrecondition) {
      return absl::InternalError("expected FAILED_PRECONDITION, got " + exec.status().ToString());
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(testing::FirstError(statuses).ok()) << testing::FirstError(statuses);
}

}  // namespace
}  // namespace herd::worker
