#pragma once
// `herd bench checkpoint`: what a checkpoint costs on this machine, beside the machine's own
// limits, measured in one run for each state size:
//  - memcpy GB/s: copying the state once in memory (the floor of the staging copy);
//  - write+fsync GB/s: one sequential file of the state's size written to the checkpoint
//    directory in 8 MiB appends and fsynced (the floor of writing it);
//  - stall: what the training thread waits at the cut: the staging copy of the model's tensors
//    (16 MiB each) into a ProcessState, and CheckpointWriter::Stage, which returns at once;
//  - write: the writer's background work (file, XXH3 of every extent and of the file, fsync);
//  - commit: checkpoint::Commit (manifest, fsyncs, renames, LATEST);
//  - durable: from the cut to the commit's return, against the target
//    1.25 x bytes / (write+fsync bandwidth) + 0.5 s;
//  - verify: checkpoint::VerifyCheckpoint reading every byte back (from the page cache, mostly).
// Staging memory: the process holds one copy of its state (the state's size) from the cut until
// its file is written; the bench prints the writer's pending_bytes() right after Stage.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace herd::bench {

struct CheckpointBenchOptions {
  std::vector<int64_t> sizes = {int64_t{64} << 20, int64_t{256} << 20, int64_t{1} << 30};
  std::string dir;  // the checkpoint directory to measure (default: a temporary directory)
  int rounds = 3;   // each size measured this many times; the median round is reported
  bool json = false;
};

absl::Status RunCheckpointBench(const CheckpointBenchOptions& options);

}  // namespace herd::bench
