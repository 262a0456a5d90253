#pragma once
// The driver of `herd bench collectives`: runs herd's ranks as processes of this same binary
// (hidden subcommand `herd bench collectives-rank`), then each peer in the same rank layout
// (OpenMPI's herd-bench-mpi under mpirun, Gloo's herd-bench-gloo as N processes), one after
// the other for each size, and prints their results side by side (tables) or as JSON lines
// (--json). Each (size, implementation) is its own set of processes with a fresh bootstrap
// store.
//
// Everything the children print on stdout that parses as a result line is a result; their
// stderr is forwarded prefixed with "[herd rank 2]" etc. A peer that is not built or whose
// launcher is missing is reported and skipped; a run that fails (a rank crashed, hung past
// the timeout, or a check failed) makes the exit code 1 after the other runs finished.

#include <string>
#include <vector>

#include "bench/rank.h"
#include "bench/sweep_spec.h"

namespace herd::bench {

struct CollectivesBenchOptions {
  int ranks = 2;
  SweepSpec spec;
  std::vector<std::string> peers;  // "mpi", "gloo"
  bool json = false;
  std::string herd_exe;  // re-executed for the rank processes
  std::string tool_dir;  // where herd-bench-mpi and herd-bench-gloo are looked for
  std::vector<std::string> herd_rank_args;  // extra flags for herd's rank processes
  // Every (size, implementation) runs this many times, interleaved; each cell reports the
  // round with the median time. With 1, --json lines stream as results arrive.
  int rounds = 1;
  // Non-empty: after the sweep, the fastest herd algorithm per (op, size) becomes decision-table
  // rules for this rank count, merged into this file (bench/tune.h).
  std::string tune_path;
  // > 0: herd's ranks run as hosts of this many ranks (rank r gets HERD_UCX_HOST_ID
  // bench-host-<r / G>): shared memory within a host, TCP over loopback between hosts, the
  // hierarchical algorithms' layout on one machine. The peers still run on one host.
  int ranks_per_host = 0;
};

// Returns the exit code: 0 when everything ran and every check passed, 1 otherwise, 128 + the
// signal when interrupted (Ctrl-C). Results go to stdout, progress and errors to stderr.
int RunCollectivesBench(const CollectivesBenchOptions& options);

// "mpi,gloo" / "none" -> the peer list; unknown names are INVALID_ARGUMENT.
absl::StatusOr<std::vector<std::string>> ParsePeerList(std::string_view csv);

// One herd rank process (the hidden `herd bench collectives-rank`, bench/rank.h): the sweep
// over a UCX communicator (`ucx`: the zero-copy and busy-poll choices), rank 0 printing each
// result and a heartbeat at most once a second as JSON lines.
int RunCollectivesRank(const RankFlags& flags, const SweepSpec& spec, transport::UcxOptions ucx);

}  // namespace herd::bench
