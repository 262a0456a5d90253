#pragma once
// The rank side of every multi-process benchmark (`herd bench collectives-rank`, the rank
// processes of herd_sparse_bench and herd_lowprec_bench, herd-emu's probe-rank and dear-rank):
// where the process stands (--rank, --ranks, and --store: the FileStore directory its driver
// made, bench/supervise.h's RankChildren), the UCX communicator it builds from that, and how it
// reports: JSON lines on stdout (rank 0 by convention), an error as "rank R: <error>" on
// stderr with exit code 1.

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "common/json.h"
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

}  // namespace herd::bench
