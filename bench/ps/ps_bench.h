#pragma once
// `herd bench ps`: push and pull goodput of the parameter server on this machine. Every
// configuration (mode x durability x shards x workers x model size) gets fresh shards (real
// ShardServer, Engine and RocksDB state in a temporary directory, each shard with its own
// gRPC server on loopback TCP) and worker clients on their own threads and channels, in this
// process. One iteration: every worker pushes the whole model (timed until every push is
// acknowledged), then every worker pulls it (timed until all arrived). Goodput counts model
// bytes (fp32; for ps_ec the uncompressed size) of all workers: workers x bytes / time.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace herd::bench {

struct PsBenchOptions {
  std::vector<std::string> modes = {"ps_sync", "ps_async", "ps_ec"};
  std::vector<std::string> durabilities = {"checkpoint-only", "every-k:10", "every-round"};
  std::vector<int> shards = {1, 2};
  std::vector<int> workers = {1, 2, 4};
  std::vector<int64_t> sizes = {4 << 20, 16 << 20, 64 << 20, 256 << 20};
  int64_t chunk_bytes = 4 << 20;  // shard-map chunk bound (one gRPC message per chunk)
  int iters = 3;                  // timed iterations after one warm-up; the median is reported
  std::string compressor = "minmax_uint8";
  std::string state_dir;  // where the shards' RocksDB directories go (default: a temp dir)
  bool json = false;
};

// Runs the sweep and prints a table (or JSON lines) on stdout.
absl::Status RunPsBench(const PsBenchOptions& options);

}  // namespace herd::bench
