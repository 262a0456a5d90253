#pragma once
// One measurement of `herd bench collectives`: how every implementation (herd's ranks, the
// peer programs) takes it, what each rank reports, and the result the driver tabulates.
//
// Units: `time_us` is the slowest rank's time per iteration in microseconds. In JSON the
// bandwidths are in gigabits per second (10^9 bit/s, `*_gbps`); the tables show GB/s
// (10^9 bytes/s). algbw = bytes / time; busbw = algbw * BusBandwidthFactor(op, ranks).

#include <cstddef>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/bench_op.h"
#include "bench/pattern.h"
#include "bench/sweep_spec.h"
#include "common/dtype.h"
#include "common/json.h"

namespace herd::bench {

inline constexpr std::string_view kCheckOk = "ok";
inline constexpr std::string_view kCheckFailed = "failed";
inline constexpr std::string_view kCheckOff = "off";

struct BenchResult {
  std::string impl;  // "herd", "mpi", "gloo"
  std::string op;    // BenchOpName
  std::string algo;  // "ring", "lp", ... for herd; the peer's own name ("MPI_Allreduce", "ring")
  int ranks = 0;
  size_t bytes = 0;            // bytes the operation moved per rank buffer (whole elements)
  size_t requested_bytes = 0;  // the --sizes entry this row answers (the table's row key)
  std::string dtype;           // DTypeName
  int iters = 0;
  double time_us = 0;  // NaN when not measured (see `detail`)
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  std::string check{kCheckOff};
  // herd only: mean over ranks of the time per iteration blocked in Communicator::wait()
  // (the rest of time_us is reductions, copies and posting); NaN when not recorded.
  double wait_us = std::numeric_limits<double>::quiet_NaN();
  // Why a check failed ("rank 2 index 17: got 3 expected 4") or why there is no time
  // ("gloo has no bf16 reduce-scatter"); empty otherwise.
  std::string detail{};

  bool measured() const;
  double algbw_GBps() const { return algbw_gbps / 8.0; }
  double busbw_GBps() const { return busbw_gbps / 8.0; }
};

// A measured result: fills time_us and both bandwidths from the seconds per iteration.
BenchResult MakeResult(std::string impl, BenchOp op, std::string algo, int ranks, size_t bytes,
                       size_t requested_bytes, std::string dtype, int iters,
                       double seconds_per_iter);
// A row that could not be measured (unsupported combination), with the reason.
BenchResult MakeUnmeasured(std::string impl, BenchOp op, std::string algo, int ranks,
                           size_t requested_bytes, std::string dtype, std::string why);

// Algorithm bandwidth in 10^9 bytes per second; 0 for a non-positive time.
double AlgBandwidthGBps(size_t bytes, double seconds);

// As JSON (time_us null when not measured; wait_us and detail only when set), and as one line.
json::Object ToJson(const BenchResult& r);
std::string ToJsonLine(const BenchResult& r);
// Reads a line written by ToJsonLine; INVALID_ARGUMENT names what is missing or malformed.
absl::StatusOr<BenchResult> ParseResultLine(std::string_view line);

// --- How each rank measures one (op, size) and reports it to rank 0.

// Plain data, sent between ranks as raw bytes: every rank is the same binary on one machine.
struct RankReport {
  double seconds_per_iter = 0;
  double waited_per_iter = -1;  // blocked in Communicator::wait(), per iteration; -1: unknown
  uint8_t checked = 0;          // 1 when this rank verified its result
  uint8_t check_ok = 0;
  uint64_t bad_index = 0;  // first wrong element, counted in the rank's result buffer
  double got = 0;
  double expected = 0;
};

// One implementation's hooks for MeasurePoint. Errors of `call` and `barrier` end it.
struct PointHooks {
  std::function<absl::Status()> call;               // one operation, in place
  std::function<absl::Status()> barrier;            // every rank enters before any leaves
  std::function<void()> prepare;                    // --check: fill the inputs from the pattern
  std::function<std::optional<Mismatch>()> verify;  // --check: the first wrong element
  // Told (phase, done, total) after every untimed and timed call (may be empty).
  std::function<void(const char* phase, int done, int total)> progress;
  // The first point its processes measure: it warms up longer (FirstPointWarmupFor).
  bool first_in_process = false;
};

// The measurement every implementation makes of (op, requested size): with --check, inputs
// from the pattern, a barrier, one call and its verification; WarmupFor untimed calls; a
// barrier; IterationsFor timed calls (FirstPointWarmupFor untimed calls for the first point of
// a process group). Every rank starts its clock as it leaves the barrier;
// the slowest rank's time is the operation's (Summarise).
absl::StatusOr<RankReport> MeasurePoint(const SweepSpec& spec, size_t requested,
                                        const PointHooks& hooks);

struct Measurement {
  std::string impl;
  BenchOp op = BenchOp::kAllReduce;
  std::string algo;
  DType dtype = DType::kFloat32;
  size_t count = 0;            // elements actually moved
  size_t requested_bytes = 0;  // the --sizes entry
  int iters = 0;
  bool check = false;  // whether --check was on
};

// Rank 0 turns every rank's report (reports[r] is rank r's) into the result: the slowest
// rank's time per iteration, and the first rank whose check failed.
BenchResult Summarise(const Measurement& m, const std::vector<RankReport>& reports);

// The median (the mean of the middle two for an even count); 0 when empty.
double Median(std::vector<double> values);

}  // namespace herd::bench
