#pragma once
// Shared by the sparse all-reduce tests: deterministic gradients, a threads-as-ranks runner that
// makes several consecutive calls with the residual carried over and records what every rank
// saw, and the invariant checks of sparse_allreduce.h, each returning an AssertionResult that
// names the call, the rank and the element where it failed.

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/statusor.h"
#include "algorithms/sparse/sparse_allreduce.h"
#include "transport/loopback/loopback_communicator.h"

namespace herd::sparse::testing {

using namespace std::chrono_literals;
constexpr std::chrono::milliseconds kTimeout = 60s;

enum class Algo { kSparDL, kTopA };
enum class Inputs {
  kRandom,  // fp32 values of varied magnitude, no two alike in practice
  kTies,    // small integers: many equal magnitudes and exact cancellations
  kSparse,  // mostly zeros: blocks with fewer non-zeros than k
};

struct Case {
  Algo algo = Algo::kSparDL;
  int ranks = 1;
  size_t count = 0;
  double density = 0.01;
  int teams = 1;
  SagAlgorithm sag = SagAlgorithm::kAuto;
  TopkMethod topk = TopkMethod::kExact;
  Inputs inputs = Inputs::kRandom;
  int calls = 3;
};
std::string Describe(const Case& c);

// Rank q's gradient at `call`, element i.
float Gradient(Inputs inputs, int rank, int call, size_t i);

// What one call did: per rank its input x = gradient + previous residual (computed by the
// test, as the algorithm must: one fp32 addition), its result, its new residual.
struct CallRecord {
  std::vector<std::vector<float>> input, result, residual;
};

// Runs c.calls consecutive calls (fresh residuals of zeros before the first; B-SAG states kept
// per rank across calls) and records each.
absl::StatusOr<std::vector<CallRecord>> RunCalls(const Case& c);

// Elements per block of the result and k per block, as the algorithm defines them.
size_t BlockElements(const Case& c);
size_t BlockK(const Case& c);

// (1) every rank's result is bitwise identical.
::testing::AssertionResult SameOnEveryRank(const CallRecord& r);
// (2) every block of the result holds at most `bound` non-zeros; with exact == true, a block
// longer than k holds exactly k (dense random inputs: enough non-zero candidates).
::testing::AssertionResult BlocksWithinK(const CallRecord& r, size_t block, size_t bound,
                                         bool exact);
// (3) sum_q input_q == P * result + sum_q residual_q, up to fp32 rounding.
::testing::AssertionResult NothingLost(const CallRecord& r);
// (4) where the result is zero, every rank's residual is bitwise its own input.
::testing::AssertionResult OutsideSupportKeepsInput(const CallRecord& r);
// (5) SparDL: where the result is non-zero, the residual is exactly zero on at least one of the
// ranks holding that block (with one team: on its owner, the rank of the block's position).
::testing::AssertionResult OwnerKeepsNothing(const CallRecord& r, const Case& c);
// TopA: every rank either delivered its whole input at an index or none of it, and delivered
// at most k entries (exactly min(k, its non-zeros) with exact == true).
::testing::AssertionResult ResidualIsAllOrNothing(const CallRecord& r, size_t k, bool exact);

// One thread per rank over a fresh fabric, which fn may use to kill a rank.
std::vector<absl::Status> RunRanksWithFabric(
    int size,
    const std::function<absl::Status(transport::Communicator&, transport::LoopbackFabric&)>& fn);

// All the checks that hold for the case, for every call.
void ExpectInvariants(const Case& c);

}  // namespace herd::sparse::testing
