#pragma once
// The one driver of the per-call benchmarks, herd_sparse_bench and herd_lowprec_bench (each a
// front end of flags and a table): the time per call of operations of ops.h on P ranks, as
// threads over loopback or as processes over UCX (the program starts itself once per rank,
// bench/rank.h); rank 0 turns every rank's times into one row per operation. The
// emulator's mode probes time their calls with the same TimeCalls.
//
// Timing (both untimed: `warmup` calls first, a barrier before timing):
//   per call: before every call the input is copied back into the data and the ranks meet in
//     a barrier, outside the timing; each call is timed on its own (herd_sparse_bench, probes);
//   loop: the calls run back to back, each from the last one's result, timed together
//     (herd_lowprec_bench, the all-reduce probe).

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/percall/ops.h"
#include "bench/rank.h"
#include "bench/timed_communicator.h"
#include "common/json.h"

namespace herd::bench {

struct Timing {
  int warmup = 2;
  int iters = 10;
  bool per_call = true;
};

// What one rank measured (plain data: gathered as bytes; the ranks are one binary).
struct RankTimes {
  double mean_s = 0, median_s = 0, min_s = 0;  // per call (loop: all three the mean)
  double waited_s = 0;                         // per call, blocked in Communicator::wait
  double checksum = 0;                         // order-sensitive, of the data after the last call
  uint64_t nonzeros = 0;
};

// Times `call` (made by MakeOp on `comm` over `data`) on every rank; `input` is what per-call
// timing copies into `data`. Returns every rank's times on rank 0 (index = rank), an empty
// vector elsewhere.
absl::StatusOr<std::vector<RankTimes>> TimeCalls(TimedCommunicator& comm, const OpCall& call,
                                                 const std::vector<float>& input,
                                                 std::vector<float>& data, const Timing& timing,
                                                 std::chrono::milliseconds timeout);

struct PerCallSpec {
  std::vector<std::string> ops;
  OpParams params;
  Timing timing;
};

// One operation's measurement, rank 0's view of all ranks.
struct Row {
  std::string transport;  // "loopback", "ucx"
  std::string algo;
  int ranks = 0;
  uint64_t count = 0;
  double density = 0;
  int teams = 1;
  int iters = 0;
  double mean_ms = 0;      // the slowest rank's (by mean) mean time per call
  double median_ms = 0;    // its median
  double min_ms = 0;       // its fastest call
  double wait_ms = 0;      // mean over ranks of the time blocked in Communicator::wait per call
  uint64_t nonzeros = 0;   // of rank 0's last result
  bool identical = false;  // every rank's last result had the same checksum
};
json::Object ToJson(const Row& row);
absl::StatusOr<Row> RowFromJson(const json::Object& line);

// Every operation of the spec in turn on `comm` (all ranks call it); rows on rank 0 only.
// `progress` (rank 0, may be empty) hears a line per operation.
absl::StatusOr<std::vector<Row>> MeasureRows(
    transport::Communicator& comm, const PerCallSpec& spec,
    const std::function<void(const std::string&)>& progress);

// P threads over a loopback fabric.
absl::StatusOr<std::vector<Row>> RunLoopback(int ranks, const PerCallSpec& spec);
// P processes over UCX: `argv` (this program with the flags that make its ranks measure
// `spec`) + --rank r --ranks P --store DIR for every rank; rank 0's rows.
absl::StatusOr<std::vector<Row>> RunUcxProcesses(int ranks, const std::vector<std::string>& argv,
                                                 std::chrono::milliseconds timeout);
// The rank process of RunUcxProcesses: measures and prints rank 0's rows as JSON lines.
int RunPerCallRank(const RankFlags& flags, const PerCallSpec& spec);

}  // namespace herd::bench
