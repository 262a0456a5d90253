#pragma once
// What each rank of any implementation (herd, or a peer program) knows after one measurement,
// and how rank 0 turns every rank's report into the result: the slowest rank's time per
// iteration, and the first rank whose check failed.

#include <cstdint>
#include <string>
#include <vector>

#include "bench/bench_op.h"
#include "bench/result.h"
#include "common/dtype.h"

namespace herd::bench {

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

// reports[r] is rank r's report.
BenchResult Summarise(const Measurement& m, const std::vector<RankReport>& reports);

}  // namespace herd::bench
