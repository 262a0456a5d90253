#pragma once
// One rank process of the DeAR replay (`herd-emu dear-rank`, started by RunDearBench): builds a
// UCX communicator through a FileStore, runs RunReplay (replay.h) with the model named, and on
// rank 0 prints one JSON line per configuration. Errors: "rank R: ..." on stderr, exit code 1.

#include <string>

#include "bench/emulator/replay.h"

namespace herd::emulator {

struct ReplayRankOptions {
  int rank = 0;
  int ranks = 1;
  std::string store_dir;
  std::string model = "resnet50";
  double compute_scale = 1.0;  // multiplies the model's compute times
  std::string configs;         // comma-separated ReplayConfig texts
  ReplayOptions replay;        // its `model` and `configs` are filled in from the above
};

int RunReplayRank(ReplayRankOptions options);

}  // namespace herd::emulator
