#pragma once
// Small checkpoints with known values for the checkpoint library's tests: every process writes
// its state file through the real writer path and the committer commits, on the real disk.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "checkpoint/env.h"
#include "checkpoint/state.h"
#include "herd/v1/checkpoint.pb.h"

namespace herd::checkpoint::testing {

// Worker `rank`'s state at `iteration`: param/a (10 floats), param/b (7 floats, as two
// extents), momentum/a (10 floats), each value a function of (rank, iteration, index); values
// "iteration" and "epoch".
ProcessState WorkerState(int rank, int64_t iteration);
// The value WorkerState puts at element `i` of `name`.
float ValueAt(const std::string& name, int rank, int64_t iteration, int64_t i);
// The layout of the model WorkerState describes.
std::vector<herd::v1::TensorLayout> Layout();

// Writes the states of `workers` workers into DIR/.tmp-<id> and commits checkpoint
// it-<iteration> of DIR through `env`.
absl::Status SaveCheckpoint(Env& env, const std::string& dir, int64_t iteration, int workers);

// Every file under `dir`, recursively (for corrupting and listing), sorted.
std::vector<std::string> FilesUnder(const std::string& dir);

}  // namespace herd::checkpoint::testing
