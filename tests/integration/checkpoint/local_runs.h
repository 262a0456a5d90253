#pragma once
// Whole jobs through the real `herd local` (HERD_BINARY), for the checkpoint tests: run one,
// read its summary (params_digest) and rank 0's per-iteration losses (--losses), or run one in
// the background and SIGKILL every one of its processes at a chosen moment.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace herd::testing {

// A fresh directory, removed with the object.
struct ScratchDir {
  ScratchDir();
  ~ScratchDir();
  std::string path;
};

// A small job: `workers` workers training the MLP in `mode` on the first `samples` images,
// one epoch, batch 32 per worker; `servers` shards when >= 0 (herd local's default else).
std::vector<std::string> SmallJob(const std::string& mode, int workers, int64_t samples,
                                  int servers = -1);

struct LocalRun {
  int rc = -1;
  std::string out;                        // stdout and stderr
  std::string digest;                     // params_digest of the JSON summary
  std::map<int64_t, std::string> losses;  // iteration -> rank 0's loss (exact, "%a")
};

// Runs `herd local args... --json --losses FILE --state DIR/state` to the end.
LocalRun RunLocal(std::vector<std::string> args, const std::string& dir);

// Starts the same in the background; once `ready()` holds (polled every 10 ms, at most
// `patience`), SIGKILLs every child (scheduler, shards, workers) and then `herd local` itself.
// Returns whether `ready()` held before the job ended on its own.
bool RunLocalAndKill(std::vector<std::string> args, const std::string& dir,
                     const std::function<bool()>& ready, std::chrono::seconds patience);

// The children of `pid` (from /proc).
std::vector<pid_t> ChildrenOf(pid_t pid);

// The content of DIR/LATEST without the newline ("" when there is none).
std::string Latest(const std::string& dir);

}  // namespace herd::testing
