#pragma once
// One rank process of herd_lowprec_bench: builds a UCX communicator through a FileStore in the
// driver's temp directory and times each operation on `count` fp32 values, printing one line
// "result <op> <seconds per call>" per operation on stdout (the driver keeps the slowest
// rank's). Errors go to stderr as "rank R: ..." and make the exit code 1.

#include <string>
#include <vector>

namespace herd::bench::lowprec {

// The operations: "clps" (C_LP_S with minmax_uint8 and both residuals), "decentralized"
// (D_FP_S, ring), "decentralized_lp" (D_LP_S, ring, minmax_uint8), "allreduce"
// (collectives::RingAllReduce, average).
inline const std::vector<std::string> kOps = {"clps", "decentralized", "decentralized_lp",
                                              "allreduce"};

struct RankOptions {
  int rank = 0;
  int ranks = 1;
  std::string store_dir;
  size_t count = 0;
  int iters = 5;
  int warmup = 1;
  std::vector<std::string> ops = kOps;
  std::string compressor = "minmax_uint8";
  size_t segment_bytes = size_t{1} << 20;  // message size of the decentralized operations
  int timeout_s = 300;
};

int RunRank(const RankOptions& options);

}  // namespace herd::bench::lowprec
