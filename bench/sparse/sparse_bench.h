#pragma once
// herd_sparse_bench: per-call time of SparDL, TopA and the dense ring all-reduce for one
// (P, count, density), with ranks as threads over loopback or as processes over UCX.
//
// Each rank holds a fixed gradient (heavy-tailed values, different per rank); every timed
// call starts from a fresh copy of it (the copy and a barrier are outside the timing), and the
// sparse algorithms carry their residual from call to call as training would. A call's time is
// the slowest rank's; rank 0 also checks that every rank ended with the same result (an
// order-sensitive checksum) and counts its non-zeros.

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "algorithms/sparse/sparse_allreduce.h"
#include "transport/communicator.h"

namespace herd::bench::sparse {

struct SparseBenchSpec {
  size_t count = 25'000'000;
  double density = 0.01;
  std::vector<std::string> algos = {"spardl", "topa", "ring"};
  int teams = 1;
  herd::sparse::SagAlgorithm sag = herd::sparse::SagAlgorithm::kAuto;
  herd::sparse::TopkMethod topk = herd::sparse::TopkMethod::kExact;
  int warmup = 2;
  int iters = 10;
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
};

// One algorithm's measurement (rank 0's view of all ranks).
struct SparseBenchRow {
  std::string transport;  // "loopback", "ucx"
  std::string algo;
  int ranks = 0;
  size_t count = 0;
  double density = 0;
  int teams = 1;
  int iters = 0;
  double mean_ms = 0;      // slowest rank's mean time per call
  double median_ms = 0;    // slowest rank's median
  double min_ms = 0;       // fastest call of the slowest rank
  double wait_ms = 0;      // mean over ranks of the time blocked in Communicator::wait per call
  size_t nonzeros = 0;     // of rank 0's last result
  bool identical = false;  // every rank's last result had the same checksum
};

std::string ToJson(const SparseBenchRow& row);
absl::StatusOr<SparseBenchRow> FromJson(const std::string& line);
// A Markdown table of the rows with, per (transport, ranks), each algorithm's speed-up over the
// ring all-reduce.
std::string RenderTable(const std::vector<SparseBenchRow>& rows);

// Runs every algorithm of the spec on `comm` (all ranks call it); on rank 0 returns the rows,
// elsewhere an empty vector. `progress` (rank 0 only, may be empty) hears one line per phase.
absl::StatusOr<std::vector<SparseBenchRow>> MeasureOnCommunicator(
    transport::Communicator& comm, const SparseBenchSpec& spec,
    const std::function<void(const std::string&)>& progress);

// P threads over a loopback fabric.
absl::StatusOr<std::vector<SparseBenchRow>> RunLoopback(int ranks, const SparseBenchSpec& spec);

// P processes over UCX: re-executes `self_exe` with child_args + "--rank r --store DIR" for
// every rank and collects rank 0's rows from its stdout.
absl::StatusOr<std::vector<SparseBenchRow>> RunUcxProcesses(
    int ranks, const std::string& self_exe, const std::vector<std::string>& child_args);

// The child side of RunUcxProcesses: bootstraps a UCX communicator through the FileStore in
// `store_dir`, measures, and on rank 0 prints each row as a JSON line. Returns the exit code.
int RunUcxRank(int rank, int ranks, const std::string& store_dir, const SparseBenchSpec& spec);

}  // namespace herd::bench::sparse
