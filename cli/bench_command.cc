// `herd bench`: benchmarks beside their peers. Subcommands:
//   collectives       herd's collectives beside OpenMPI and Gloo (bench/collectives_driver.h)
//   collectives-rank  hidden: one rank process of the above, started by it

#include <unistd.h>

#include <climits>
#include <string>

#include "bench/collectives_driver.h"
#include "bench/rank_process.h"
#include "bench/sweep_spec.h"
#include "cli/command.h"

namespace herd::cli {
namespace {

// This binary's path, so the driver can start its rank processes and find the peers beside it.
std::string SelfExe() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "herd";
  return std::string(buf, static_cast<size_t>(n));
}

class BenchCommand : public Command {
 public:
  void Configure(CLI::App& app) override {
    app.require_subcommand(1);

    collectives_ = app.add_subcommand(
        "collectives",
        "herd's collectives beside OpenMPI and Gloo, in the same rank layout on this machine. "
        "Each implementation runs as N processes; every (op, algorithm, size) is warmed up, "
        "the ranks synchronise, K iterations are timed, and the slowest rank's time per "
        "iteration is reported with algbw = bytes/time and busbw = algbw x the nccl-tests "
        "factor (allreduce 2(P-1)/P; reduce_scatter, allgather, alltoall (P-1)/P; broadcast, "
        "reduce 1). Tables show GB/s (10^9 bytes/s); --json prints gigabits/s (*_gbps).");
    flags_.Register(*collectives_, /*for_users=*/true);
    collectives_->add_option("--ranks", ranks_, "Number of ranks (processes) per implementation")
        ->check(CLI::Range(1, 128))
        ->capture_default_str();
    collectives_
        ->add_option("--peers", peers_,
                     "Peers to run after herd: a comma-separated subset of mpi,gloo, or "
                     "none. A peer that is not installed or built is reported and skipped")
        ->capture_default_str();
    collectives_->add_flag("--json", json_,
                           "One JSON object per result line on stdout and nothing else (impl, op, "
                           "algo, ranks, bytes, dtype, iters, time_us, algbw_gbps, busbw_gbps in "
                           "gigabits/s, check)");
    collectives_->add_flag("--ucx-zero-copy", ucx_zero_copy_,
                           "herd: move large messages between ranks with UCX's cross-memory "
                           "attach (one kernel copy) instead of the shared-memory FIFO; see "
                           "transport/ucx/ucx_communicator.h for the failure-handling trade-off");
    collectives_
        ->add_option("--rounds", rounds_,
                     "Measure every size of every implementation this many times, "
                     "interleaved, and report the round with the median time (for a "
                     "machine shared with other work); --json then prints the medians at "
                     "the end")
        ->check(CLI::Range(1, 100))
        ->capture_default_str();
    collectives_->add_flag("--busy-poll", busy_poll_,
                           "herd: spin in waits instead of sleeping (only with a core per rank)");

    // Hidden (empty group): started by `collectives` only, with the same sweep flags.
    rank_ = app.add_subcommand("collectives-rank", "one rank of herd bench collectives");
    rank_->group("");
    rank_flags_.Register(*rank_, /*for_users=*/false);
    rank_->add_option("--rank", rank_options_.rank)->required();
    rank_->add_option("--ranks", rank_options_.ranks)->required()->check(CLI::Range(1, 65536));
    rank_->add_option("--store", rank_options_.store_dir)->required();
    rank_->add_flag("--ucx-zero-copy", rank_options_.ucx_zero_copy);
    rank_->add_flag("--busy-poll", rank_options_.busy_poll);
  }

  int Run() override {
    if (rank_->parsed()) return RunRank();
    return RunCollectives();
  }

 private:
  int RunCollectives() {
    auto spec = flags_.ToSpec();
    if (!spec.ok()) return UsageError(*collectives_, std::string(spec.status().message()));
    auto peers = bench::ParsePeerList(peers_);
    if (!peers.ok()) {
      return UsageError(*collectives_, "--peers: " + std::string(peers.status().message()));
    }
    bench::CollectivesBenchOptions options;
    options.ranks = ranks_;
    options.spec = *spec;
    options.peers = *peers;
    options.json = json_;
    options.herd_exe = SelfExe();
    options.tool_dir = options.herd_exe.substr(0, options.herd_exe.rfind('/'));
    options.rounds = rounds_;
    if (ucx_zero_copy_) options.herd_rank_args.push_back("--ucx-zero-copy");
    if (busy_poll_) options.herd_rank_args.push_back("--busy-poll");
    return bench::RunCollectivesBench(options);
  }

  int RunRank() {
    auto spec = rank_flags_.ToSpec();
    if (!spec.ok()) return UsageError(*rank_, std::string(spec.status().message()));
    if (rank_options_.rank < 0 || rank_options_.rank >= rank_options_.ranks) {
      return UsageError(*rank_, "--rank must be in [0, --ranks)");
    }
    rank_options_.spec = *spec;
    return bench::RunRankProcess(rank_options_);
  }

  CLI::App* collectives_ = nullptr;
  CLI::App* rank_ = nullptr;
  bench::SweepFlags flags_;
  int ranks_ = 4;
  std::string peers_ = "mpi,gloo";
  bool json_ = false;
  bool ucx_zero_copy_ = false;
  bool busy_poll_ = false;
  int rounds_ = 1;

  bench::SweepFlags rank_flags_;
  bench::RankProcessOptions rank_options_;
};

HERD_REGISTER_COMMAND(BenchCommand, "bench", 60,
                      "Benchmarks: herd's collectives beside OpenMPI and Gloo");

}  // namespace
}  // namespace herd::cli
