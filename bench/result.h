#pragma once
// One measurement: what the ranks and the peers print as a JSON line and the driver tabulates.
//
// Units: `time_us` is the slowest rank's time per iteration in microseconds. In JSON the
// bandwidths are in gigabits per second (10^9 bit/s, `*_gbps`); the tables show GB/s
// (10^9 bytes/s). algbw = bytes / time; busbw = algbw * BusBandwidthFactor(op, ranks).

#include <cstddef>
#include <limits>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "bench/bench_op.h"

namespace herd::bench {

inline constexpr std::string_view kCheckOk = "ok";
inline constexpr std::string_view kCheckFailed = "failed";
inline constexpr std::string_view kCheckOff = "off";
// A line {"progress": "..."} on a rank's stdout is a heartbeat, not a result.
inline constexpr std::string_view kProgressKey = "progress";

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
  std::string detail;

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

std::string ToJsonLine(const BenchResult& r);
// Reads a line written by ToJsonLine; INVALID_ARGUMENT names what is missing or malformed.
absl::StatusOr<BenchResult> ParseResultLine(std::string_view line);

}  // namespace herd::bench
