// `herd bench`: benchmarks beside their peers. Subcommands:
//   collectives       herd's collectives beside OpenMPI and Gloo (bench/collectives_driver.h)
//   collectives-rank  hidden: one rank process of the above, started by it
//   ps                the parameter server's push and pull goodput (bench/ps/ps_bench.h)
//   checkpoint        a checkpoint's stall, write and commit times (bench/checkpoint/)

#include <cstdio>
#include <memory>
#include <set>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "algorithms/collectives/decision_table.h"
#include "bench/checkpoint/checkpoint_bench.h"
#include "bench/collectives_driver.h"
#include "bench/control_plane/control_plane_bench.h"
#include "bench/ps/ps_bench.h"
#include "bench/rank.h"
#include "bench/sizes.h"
#include "bench/sweep_spec.h"
#include "bench/tune.h"
#include "cli/command.h"

namespace herd::cli {
namespace {

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
    collectives_->add_option(
        "--table", table_,
        "herd: the decision table algorithm 'auto' consults (a file `--tune` wrote; default: "
        "$HERD_COLLECTIVES_TABLE, else the table compiled into herd)");
    collectives_
        ->add_option("--ranks-per-host", ranks_per_host_,
                     "herd: run the ranks as hosts of this many (a host identity per group: "
                     "shared memory within a host, TCP over loopback between hosts), the layout "
                     "of the hierarchical algorithms; 0: every rank on this host. The peers "
                     "still run on one host")
        ->check(CLI::Range(0, 128))
        ->capture_default_str();
    collectives_->add_option(
        "--tune", tune_,
        "Measure every herd algorithm of each operation (no peers; default sizes 1K..16M in "
        "powers of 4) and write the fastest per size as decision-table rules for this rank "
        "count and element size into this file, replacing its rules for them and keeping the "
        "others");

    ps_ = app.add_subcommand(
        "ps",
        "Parameter-server push and pull goodput: fresh in-process shards (gRPC on loopback, "
        "RocksDB state in a temporary directory) and worker clients on their own channels; "
        "each worker pushes the whole model, then pulls it; goodput = workers x model bytes / "
        "time, in gigabits/s (ps_ec: the uncompressed size)");
    ps_->add_option("--modes", ps_modes_, "Comma-separated subset of ps_sync,ps_async,ps_ec")
        ->capture_default_str();
    ps_->add_option("--durability", ps_durability_,
                    "Comma-separated durability policies (checkpoint-only, every-k:K, "
                    "every-round)")
        ->capture_default_str();
    ps_->add_option("--shards", ps_shards_, "Comma-separated shard counts")->capture_default_str();
    ps_->add_option("--workers", ps_workers_, "Comma-separated worker counts")
        ->capture_default_str();
    ps_->add_option("--sizes", ps_sizes_, "Comma-separated model sizes (e.g. 4MiB,120MB)")
        ->capture_default_str();
    ps_->add_option("--chunk-bytes", ps_chunk_, "Shard-map chunk bound (one message per chunk)")
        ->capture_default_str();
    ps_->add_option("--iters", ps_options_.iters, "Timed iterations (after one warm-up)")
        ->check(CLI::Range(1, 1000))
        ->capture_default_str();
    ps_->add_option("--compressor", ps_options_.compressor, "ps_ec: minmax_uint8 | sign")
        ->capture_default_str();
    ps_->add_option("--state-dir", ps_options_.state_dir,
                    "Where the shards' RocksDB directories go (default: a temporary directory; "
                    "put it on the disk you want to measure)");
    ps_->add_flag("--json", ps_options_.json,
                  "One JSON object per configuration (mode, durability, shards, workers, bytes, "
                  "iters, push_s, pull_s, push_gbps, pull_gbps)");

    checkpoint_ = app.add_subcommand(
        "checkpoint",
        "What a checkpoint costs beside this machine's limits, per state size: memcpy and "
        "write+fsync bandwidth of the directory, the training stall at the cut (staging copy + "
        "Stage), the background write, the commit, the time until durable against 1.25 x "
        "bytes / disk bandwidth + 0.5 s, and a verify (bench/checkpoint/checkpoint_bench.h)");
    checkpoint_->add_option("--sizes", ckpt_sizes_, "Comma-separated state sizes")
        ->capture_default_str();
    checkpoint_->add_option("--dir", ckpt_options_.dir,
                            "The checkpoint directory to measure (default: a temporary "
                            "directory under $TMPDIR)");
    checkpoint_->add_option("--rounds", ckpt_options_.rounds, "Rounds per size (median reported)")
        ->check(CLI::Range(1, 20))
        ->capture_default_str();
    checkpoint_->add_flag("--json", ckpt_options_.json, "One JSON object per size");

    control_ = app.add_subcommand(
        "control-plane",
        "The scheduler's cost as a job grows: a real `herd scheduler` process against N "
        "simulated workers speaking its protocol (one Follow stream each) beside the "
        "per-iteration protocol it replaced (GetPlan + ReportIteration); one row (or JSON line) "
        "per protocol and worker count (bench/control_plane/sim.h)");
    control_->add_option("--workers", cp_workers_, "Comma-separated worker counts")
        ->capture_default_str();
    control_->add_option("--protocols", cp_protocols_, "Comma-separated: follow, legacy")
        ->capture_default_str();
    control_->add_option("--iterations", cp_options_.iterations, "Measured iterations")
        ->check(CLI::Range(1, 100000))
        ->capture_default_str();
    control_->add_option("--rate", cp_options_.rate, "Iterations per second the job runs at")
        ->check(CLI::Range(0.1, 10000.0))
        ->capture_default_str();
    control_
        ->add_option("--ucx-address-bytes", cp_options_.ucx_address_bytes,
                     "Bytes of the UCX address each worker registers")
        ->check(CLI::Range(0, 16384))
        ->capture_default_str();
    control_
        ->add_option("--heartbeat-timeout-ms", cp_timeout_ms_,
                     "The scheduler's heartbeat timeout (membership_change_s is net of it)")
        ->check(CLI::Range(100, 600000))
        ->capture_default_str();
    control_->add_option("--scheduler-binary", cp_options_.scheduler_binary,
                         "The herd executable that runs the scheduler (default: this one)");
    control_->add_option("--legacy-scheduler-binary", cp_options_.legacy_scheduler_binary,
                         "The herd executable whose scheduler the legacy protocol runs against "
                         "(e.g. a build of the release before the Follow stream)");
    control_->add_flag("--no-changes", cp_no_changes_,
                       "Skip the mode switch and the membership change");
    control_->add_flag("--json", cp_options_.json, "One JSON object per protocol and count");

    // Hidden (empty group): started by `collectives` only, with the same sweep flags.
    rank_ = app.add_subcommand("collectives-rank", "one rank of herd bench collectives");
    rank_->group("");
    rank_sweep_.Register(*rank_, /*for_users=*/false);
    rank_flags_.Register(*rank_, /*required=*/true);
    rank_->add_flag("--ucx-zero-copy", rank_ucx_.same_host_zero_copy);
    rank_->add_flag("--busy-poll", rank_ucx_.busy_poll);
    rank_->add_option("--table", rank_table_);
  }

  int Run() override {
    if (rank_->parsed()) return RunRank();
    if (ps_->parsed()) return RunPs();
    if (checkpoint_->parsed()) return RunCheckpoint();
    if (control_->parsed()) return RunControlPlane();
    return RunCollectives();
  }

 private:
  int RunControlPlane() {
    cp_options_.workers.clear();
    for (const auto& n :
         std::vector<std::string>(absl::StrSplit(cp_workers_, ',', absl::SkipEmpty()))) {
      int v = 0;
      if (!absl::SimpleAtoi(n, &v) || v < 1 || v > 16384) {
        return UsageError(*control_, "--workers: '" + n + "' is not a count in 1..16384");
      }
      cp_options_.workers.push_back(v);
    }
    cp_options_.protocols = absl::StrSplit(cp_protocols_, ',', absl::SkipEmpty());
    cp_options_.heartbeat_timeout = std::chrono::milliseconds(cp_timeout_ms_);
    cp_options_.changes = !cp_no_changes_;
    auto st = bench::control_plane::RunControlPlaneBench(cp_options_);
    if (!st.ok()) {
      std::fprintf(stderr, "herd bench control-plane: %s\n", std::string(st.message()).c_str());
      return kExitFailure;
    }
    return kExitOk;
  }

  int RunCheckpoint() {
    auto sizes = bench::ParseByteSizeList(ckpt_sizes_);
    if (!sizes.ok()) return UsageError(*checkpoint_, std::string(sizes.status().message()));
    ckpt_options_.sizes.assign(sizes->begin(), sizes->end());
    auto st = bench::RunCheckpointBench(ckpt_options_);
    if (!st.ok()) {
      std::fprintf(stderr, "herd bench checkpoint: %s\n", st.ToString().c_str());
      return kExitFailure;
    }
    return kExitOk;
  }

  int RunPs() {
    auto split = [](const std::string& csv) {
      return std::vector<std::string>(absl::StrSplit(csv, ',', absl::SkipEmpty()));
    };
    ps_options_.modes = split(ps_modes_);
    ps_options_.durabilities = split(ps_durability_);
    ps_options_.shards.clear();
    ps_options_.workers.clear();
    for (const auto& [text, out] : {std::pair{ps_shards_, &ps_options_.shards},
                                    std::pair{ps_workers_, &ps_options_.workers}}) {
      for (const auto& n : split(text)) {
        int v = 0;
        if (!absl::SimpleAtoi(n, &v) || v < 1 || v > 64) {
          return UsageError(*ps_, "'" + n + "' is not a count in 1..64");
        }
        out->push_back(v);
      }
    }
    auto sizes = bench::ParseByteSizeList(ps_sizes_);
    if (!sizes.ok()) return UsageError(*ps_, std::string(sizes.status().message()));
    ps_options_.sizes.assign(sizes->begin(), sizes->end());
    auto chunk = bench::ParseByteSize(ps_chunk_);
    if (!chunk.ok()) return UsageError(*ps_, std::string(chunk.status().message()));
    ps_options_.chunk_bytes = static_cast<int64_t>(*chunk);
    auto st = bench::RunPsBench(ps_options_);
    if (!st.ok()) {
      std::fprintf(stderr, "herd bench ps: %s\n", std::string(st.message()).c_str());
      return kExitFailure;
    }
    return kExitOk;
  }

  int RunCollectives() {
    auto spec = flags_.ToSpec();
    if (!spec.ok()) return UsageError(*collectives_, std::string(spec.status().message()));
    if (!table_.empty()) {
      // Read it here so that a bad file is a usage error before any process starts.
      auto table = collectives::DecisionTable::Load(table_);
      if (!table.ok()) return UsageError(*collectives_, std::string(table.status().message()));
    }
    if (!tune_.empty()) {
      // Every algorithm but auto (which would measure the table being made), no peers.
      // shm runs on one host only, hier only across hosts (on one host it is shm again).
      if (flags_.algos.empty()) {
        std::set<std::string> seen;
        const std::string_view other_layout = ranks_per_host_ > 0 ? "shm" : "hier";
        for (bench::BenchOp op : spec->ops) {
          for (std::string_view algo : bench::HerdAlgorithms(op)) {
            if (algo != "auto" && algo != other_layout && seen.insert(std::string(algo)).second) {
              spec->algos.emplace_back(algo);
            }
          }
        }
      }
      if (flags_.sizes.empty()) spec->sizes = bench::DefaultTuneSizes();
      peers_ = "none";
    }
    auto peers = bench::ParsePeerList(peers_);
    if (!peers.ok()) {
      return UsageError(*collectives_, "--peers: " + std::string(peers.status().message()));
    }
    bench::CollectivesBenchOptions options;
    options.ranks = ranks_;
    options.spec = *spec;
    options.peers = *peers;
    options.json = json_;
    options.herd_exe = bench::SelfExe();
    options.tool_dir = options.herd_exe.substr(0, options.herd_exe.rfind('/'));
    options.rounds = rounds_;
    if (ucx_zero_copy_) options.herd_rank_args.push_back("--ucx-zero-copy");
    if (busy_poll_) options.herd_rank_args.push_back("--busy-poll");
    if (!table_.empty()) {
      options.herd_rank_args.push_back("--table");
      options.herd_rank_args.push_back(table_);
    }
    options.tune_path = tune_;
    options.ranks_per_host = ranks_per_host_;
    return bench::RunCollectivesBench(options);
  }

  int RunRank() {
    auto spec = rank_sweep_.ToSpec();
    if (!spec.ok()) return UsageError(*rank_, std::string(spec.status().message()));
    if (rank_flags_.rank < 0 || rank_flags_.rank >= rank_flags_.ranks) {
      return UsageError(*rank_, "--rank must be in [0, --ranks)");
    }
    if (!rank_table_.empty()) {
      auto table = collectives::DecisionTable::Load(rank_table_);
      if (!table.ok()) return UsageError(*rank_, std::string(table.status().message()));
      collectives::SetActiveDecisionTable(
          std::make_shared<const collectives::DecisionTable>(*std::move(table)));
    }
    return bench::RunCollectivesRank(rank_flags_, *spec, rank_ucx_);
  }

  CLI::App* collectives_ = nullptr;
  CLI::App* rank_ = nullptr;
  bench::SweepFlags flags_;
  int ranks_ = 4;
  int ranks_per_host_ = 0;
  std::string peers_ = "mpi,gloo";
  bool json_ = false;
  bool ucx_zero_copy_ = false;
  bool busy_poll_ = false;
  int rounds_ = 1;
  std::string table_;
  std::string tune_;

  CLI::App* ps_ = nullptr;
  bench::PsBenchOptions ps_options_;
  std::string ps_modes_ = "ps_sync,ps_async,ps_ec";
  std::string ps_durability_ = "checkpoint-only,every-round";
  std::string ps_shards_ = "1,2";
  std::string ps_workers_ = "1,2,4";
  std::string ps_sizes_ = "4MiB,16MiB,64MiB,256MiB";
  std::string ps_chunk_ = "4MiB";

  CLI::App* control_ = nullptr;
  bench::control_plane::BenchOptions cp_options_;
  std::string cp_workers_ = "64,256,1024";
  std::string cp_protocols_ = "follow,legacy";
  int64_t cp_timeout_ms_ = 10000;
  bool cp_no_changes_ = false;

  CLI::App* checkpoint_ = nullptr;
  bench::CheckpointBenchOptions ckpt_options_;
  std::string ckpt_sizes_ = "64MiB,256MiB,1GiB";

  bench::SweepFlags rank_sweep_;
  bench::RankFlags rank_flags_;
  transport::UcxOptions rank_ucx_;
  std::string rank_table_;
};

HERD_REGISTER_COMMAND(
    BenchCommand, "bench", 60,
    "Benchmarks: herd's collectives beside OpenMPI and Gloo; the parameter server; checkpoints");

}  // namespace
}  // namespace herd::cli
