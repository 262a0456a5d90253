#pragma once
// One herd rank process of `herd bench collectives` (the hidden `herd bench collectives-rank`):
// bootstraps a UCX communicator through a FileStore in the driver's temp directory, runs the
// sweep, and on rank 0 prints each result as a JSON line on stdout. Errors go to stderr as
// "rank R: <what failed>" and make the exit code 1.

#include <string>

#include "bench/sweep_spec.h"

namespace herd::bench {

struct RankProcessOptions {
  int rank = 0;
  int ranks = 1;
  std::string store_dir;
  SweepSpec spec;
  bool ucx_zero_copy = false;  // transport::UcxOptions::same_host_zero_copy
  bool busy_poll = false;      // transport::UcxOptions::busy_poll
};

int RunRankProcess(const RankProcessOptions& options);

}  // namespace herd::bench
