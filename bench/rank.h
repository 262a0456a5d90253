#pragma once
// How every multi-process benchmark runs its ranks (`herd bench collectives` and its
// collectives-rank, herd_sparse_bench and herd_lowprec_bench with --rank, herd-emu's probe-rank
// and dear-rank). The driver starts P processes (RankChildren, RunRanks) that learn where they
// stand from --rank, --ranks and --store (a FileStore directory the driver made); a rank builds
// its UCX communicator from that (RunRank) and reports JSON lines on stdout (rank 0 by
// convention; {"progress": ...} lines are heartbeats), an error as "rank R: <error>" on stderr
// with exit code 1. The driver supervises them with common/supervise.h.

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "common/json.h"
#include "common/supervise.h"
#include "transport/communicator.h"
#include "transport/ucx/ucx_communicator.h"

namespace CLI {
class App;
}

namespace herd::bench {

struct RankFlags {
  int rank = -1;  // -1: not a rank process
  int ranks = 1;
  std::string store;
  // Adds --rank, --ranks and --store to `app`; `required` for a rank-only subcommand, else
  // hidden options (a program that is its own driver). `ranks` false leaves --ranks to the app.
  void Register(CLI::App& app, bool required, bool ranks = true);
};

// Connects this rank to its peers over UCX (through the FileStore in flags.store) and runs
// `body` on the communicator. Returns the process's exit code.
int RunRank(const RankFlags& flags, const transport::UcxOptions& ucx,
            const std::function<absl::Status(transport::Communicator&)>& body);

// One line on stdout, flushed at once: the driver's silence watchdog counts lines.
void PrintLine(const json::Object& line);

// --- The driver's side.

// `argv` + {"--rank", r, "--ranks", P, "--store", store} for r in [0, P), named "<label> rank r".
std::vector<ChildSpec> RankChildren(const std::string& label, const std::vector<std::string>& argv,
                                    int ranks, const std::string& store);

// This program's path (/proc/self/exe), for re-executing it as rank processes.
std::string SelfExe();

// A line {"progress": "..."} on a rank's stdout is a heartbeat, not a result.
inline constexpr std::string_view kProgressKey = "progress";

// Runs the RankChildren of `argv` in a fresh store directory (each passed through `wrap` when
// set: into a network namespace, say) and returns the JSON objects rank 0 printed. Rank 0's
// heartbeats go to stderr as "<label>: <what>", everything else the ranks print as
// "[<label> rank r] <line>". A Ctrl-C stops the ranks (it installs InstallInterruptHandlers).
// Errors: how the ranks failed (GroupOutcome::Describe), or no JSON line from rank 0.
absl::StatusOr<std::vector<json::Object>> RunRanks(
    const std::string& label, const std::vector<std::string>& argv, int ranks,
    std::chrono::milliseconds silence_timeout,
    const std::function<ChildSpec(int rank, ChildSpec child)>& wrap = {});

}  // namespace herd::bench
