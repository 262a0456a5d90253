#pragma once
// Sparse all-reduce of fp32 gradients with error feedback: SparDL (Spar-Reduce-Scatter, global
// residual collection, Spar-All-Gather, Bruck all-gather) and the TopA baseline (all-gather of
// every rank's top-k). Gloo style: one options struct, one free function per algorithm.
// docs/sparse.md describes the algorithms, the schedule and every choice the paper left open.
//
// Contract of both operations, called by every rank with the same count, density and teams:
//  - in:  data = this rank's gradient, residual = what the previous call left (zeros at first);
//    out: data = the average over the ranks of the sparse-reduced gradient (dense, count
//         elements; zero outside the selected indices), bitwise identical on every rank;
//         residual = everything of (gradient + previous residual) this rank did not deliver
//         into the result, to be added to the next call's gradient (the caller keeps it).
//  - nothing is lost: sum over ranks of (gradient + previous residual)
//      == P * result + sum over ranks of the new residuals, up to fp32 rounding;
//  - at every index outside the result's support each rank's new residual is exactly its own
//    gradient + previous residual (the end-procedure residual stays with its owner).
//  - correct for every P >= 1 and count >= 0; the options are validated first
//    (INVALID_ARGUMENT, nothing sent); on any transport error, or a peer's message that does
//    not fit these options, the communicator is aborted and the error returned; every wait
//    ends by `timeout` after the call began. Host memory only (FAILED_PRECONDITION otherwise).
//  - an invalid option changes nothing; after any later error nothing is lost either: residual
//    holds gradient + previous residual and data is zeroed (its content moved into residual).
//  - single-threaded per rank; extra memory O(count * density) per rank, plus the top-k
//    candidates (about k per block).

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "algorithms/collectives/options.h"
#include "algorithms/sparse/topk.h"

namespace herd::sparse {

// How the teams are synchronised after Spar-Reduce-Scatter (teams > 1).
enum class SagAlgorithm : uint8_t {
  kAuto = 0,       // R-SAG when teams is a power of two, else B-SAG
  kRecursive = 1,  // R-SAG: recursive doubling with a top-k after each exchange
  kBruck = 2,      // B-SAG: extra top-k, Bruck all-gather across teams, top-k of the sum
};
std::string_view SagAlgorithmName(SagAlgorithm a);  // "auto", "rsag", "bsag"
absl::StatusOr<SagAlgorithm> ParseSagAlgorithm(std::string_view name);

// B-SAG's step-adjusted extra top-k, kept by the caller between calls (like the residual).
// Before the Bruck all-gather across teams each rank keeps only k' = ratio * k entries of its
// block; `ratio` moves within [1/teams, 1] so that the sum gathered from the teams holds about k
// entries: after a call whose gathered sum held more than k entries the direction is "down",
// else "up"; the step doubles while the direction stays and halves when it turns.
// Every rank of a job passes its own state; ranks at the same team position see the same counts
// and so keep identical states.
struct BsagState {
  double ratio = 0;          // 0: not started; the first call starts at 1 / teams
  double step = 0;           // the next move of ratio (starts at 1 / teams)
  int direction = 0;         // +1 up, -1 down, 0 not started
  size_t last_gathered = 0;  // entries of the gathered sum in the last call (for monitoring)
};

struct SparseAllReduceOptions : collectives::CommonOptions {
  float* data = nullptr;      // in: gradient; out: averaged sparse-reduced result (count floats)
  float* residual = nullptr;  // in: previous residual; out: new residual (count floats)
  size_t count = 0;
  // Fraction of each block delivered: k = max(1, round(C * density)) entries per block, where
  // C = ceil(count / team size) (SparDL) or C = count (TopA). In (0, 1].
  double density = 0.01;
  // SparDL: the ranks form `teams` teams of P / teams consecutive ranks (P % teams == 0).
  int teams = 1;
  SagAlgorithm sag = SagAlgorithm::kAuto;
  TopkMethod topk = TopkMethod::kExact;
  // B-SAG only; null: a fresh state every call (ratio stays at its start, 1 / teams).
  BsagState* bsag = nullptr;
};

// SparDL with global residual collection. Messages per rank: P/teams - 1 block transfers,
// log2(teams) R-SAG exchanges or ceil(log2 teams) B-SAG rounds, ceil(log2(P/teams)) Bruck
// rounds; each block carries at most k entries (8 bytes each).
absl::Status SparDLAllReduce(const SparseAllReduceOptions& options);

// TopA: each rank's top-k of (gradient + residual) over the whole vector (k from count and
// density, teams/sag ignored), all-gathered by Bruck and summed in rank order on every rank.
// The result holds up to P * k non-zeros. ceil(log2 P) rounds.
absl::Status TopkAllGatherAllReduce(const SparseAllReduceOptions& options);

// k for a block of `block_elements`: max(1, round(block_elements * density)).
size_t BlockK(size_t block_elements, double density);

}  // namespace herd::sparse
