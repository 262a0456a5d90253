#include "bench/collectives_driver.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/herd_sweep.h"
#include "bench/rank.h"
#include "bench/result.h"
#include "bench/sizes.h"
#include "bench/table.h"
#include "bench/tune.h"
#include "common/temp_dir.h"

namespace herd::bench {
namespace {

std::string Str(int v) { return absl::StrFormat("%d", v); }

// One run (herd or a peer): its children and how to label its failure.
struct Run {
  std::string name;  // "herd", "mpi", "gloo"
  std::vector<ChildSpec> children;
  std::chrono::milliseconds silence_timeout;
};

class Driver {
 public:
  explicit Driver(const CollectivesBenchOptions& o) : o_(o) {}

  int Main() {
    InstallInterruptHandlers();
    auto dir = TempDir::Create("herd-bench");
    if (!dir.ok()) {
      Error(std::string(dir.status().message()));
      return 1;
    }
    if (!o_.json) PrintHeader();

    // Which implementations can run at all; the others are named once.
    std::vector<std::string> impls = {"herd"};
    for (const std::string& peer : o_.peers) {
      const std::string why_not = peer == "mpi" ? MpiMissing() : GlooMissing();
      if (why_not.empty()) {
        impls.push_back(peer);
      } else {
        notes_.push_back(absl::StrFormat("%s: not run: %s", peer, why_not));
        if (o_.json) Error(notes_.back());
      }
    }

    // Size by size, each implementation in turn (and all of it again per round): the cells of
    // one row are measured seconds, not a whole sweep, apart, so load that comes and goes on
    // the machine skews the ratios less. An implementation that failed is not run again.
    std::set<std::string> broken;
    int execution = 0;
    for (int round = 0; round < o_.rounds && interrupted_ == 0; ++round) {
      for (size_t size : o_.spec.sizes) {
        for (const std::string& impl : impls) {
          if (broken.count(impl) || interrupted_ != 0) continue;
          SweepSpec one = o_.spec;
          one.sizes = {size};
          const std::string store = absl::StrFormat("%s/%s-%d", dir->path(), impl, execution++);
          const Run run = impl == "herd"  ? HerdRun(one, store)
                          : impl == "mpi" ? MpiRun(one)
                                          : GlooRun(one, store);
          if (!Execute(run)) broken.insert(impl);
        }
      }
    }

    const std::vector<BenchResult> results = o_.rounds > 1 ? Medians() : results_;
    if (o_.json && o_.rounds > 1) {
      for (const BenchResult& r : results) std::printf("%s\n", ToJsonLine(r).c_str());
    }
    if (!o_.json) {
      std::fputs(RenderTables(results).c_str(), stdout);
      if (o_.rounds > 1) std::printf("\n(each cell: the median of %d rounds)\n", o_.rounds);
      if (!notes_.empty()) std::printf("\nnotes:\n");
      for (const std::string& n : notes_) std::printf("  %s\n", n.c_str());
    }
    std::fflush(stdout);
    for (const BenchResult& r : results_) {
      if (r.check == kCheckFailed) failed_ = true;
    }
    if (!o_.tune_path.empty() && !failed_ && interrupted_ == 0) WriteTable(results);
    if (interrupted_ != 0) return 128 + interrupted_;
    return failed_ ? 1 : 0;
  }

  // One result per (impl, op, algo, size): the round with the median time. A failed check in
  // any round wins, so that the other rounds never hide a failure.
  std::vector<BenchResult> Medians() const {
    std::vector<std::vector<const BenchResult*>> groups;
    for (const BenchResult& r : results_) {
      auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) {
        const BenchResult& o = *g.front();
        return o.impl == r.impl && o.op == r.op && o.algo == r.algo &&
               o.requested_bytes == r.requested_bytes;
      });
      if (it == groups.end()) {
        groups.push_back({&r});
      } else {
        it->push_back(&r);
      }
    }
    std::vector<BenchResult> out;
    for (auto& g : groups) {
      auto failed = std::find_if(g.begin(), g.end(),
                                 [](const BenchResult* r) { return r->check == kCheckFailed; });
      if (failed != g.end()) {
        out.push_back(**failed);
        continue;
      }
      std::sort(g.begin(), g.end(), [](const BenchResult* a, const BenchResult* b) {
        if (a->measured() != b->measured()) return a->measured();  // unmeasured last
        return a->time_us < b->time_us;
      });
      out.push_back(*g[(g.size() - 1) / 2]);
    }
    return out;
  }

 private:
  // The tuning run's output: the rules for this rank count, merged into the file.
  void WriteTable(const std::vector<BenchResult>& results) {
    const int hosts =
        o_.ranks_per_host > 0 ? (o_.ranks + o_.ranks_per_host - 1) / o_.ranks_per_host : 1;
    const auto rules = RulesFromResults(results, o_.ranks, DTypeSize(o_.spec.dtype), hosts);
    if (rules.empty()) {
      failed_ = true;
      Error("--tune: nothing was measured, the table is unchanged");
      return;
    }
    if (absl::Status st = MergeIntoTableFile(o_.tune_path, rules); !st.ok()) {
      failed_ = true;
      Error(absl::StrFormat("--tune: %s", std::string(st.message())));
      return;
    }
    collectives::DecisionTable mine;
    mine.Merge(rules);
    absl::FPrintF(stderr, "herd bench: wrote %d rules for %d ranks to %s:\n%s", rules.size(),
                  o_.ranks, o_.tune_path, mine.Format());
  }

  void Error(const std::string& message) {
    std::fprintf(stderr, "herd bench: %s\n", message.c_str());
    std::fflush(stderr);
  }

  void PrintHeader() {
    std::vector<std::string> ops, sizes;
    for (BenchOp op : o_.spec.ops) ops.emplace_back(BenchOpName(op));
    for (size_t s : o_.spec.sizes) sizes.push_back(FormatByteSize(s));
    absl::FPrintF(
        stderr, "herd bench collectives: %d ranks, %s, ops %s, sizes %s, peers %s%s\n", o_.ranks,
        DTypeName(o_.spec.dtype), absl::StrJoin(ops, ","), absl::StrJoin(sizes, ","),
        o_.peers.empty() ? "none" : absl::StrJoin(o_.peers, ","), o_.spec.check ? ", checked" : "");
  }

  Run HerdRun(const SweepSpec& spec, const std::string& store) {
    std::vector<std::string> argv = {o_.herd_exe, "bench", "collectives-rank"};
    for (const auto& args : {SweepArgs(spec), o_.herd_rank_args}) {
      argv.insert(argv.end(), args.begin(), args.end());
    }
    std::vector<ChildSpec> children = RankChildren("herd", argv, o_.ranks, store);
    if (o_.ranks_per_host > 0) {
      for (size_t r = 0; r < children.size(); ++r) {
        children[r].env.push_back(
            absl::StrFormat("HERD_UCX_HOST_ID=bench-host-%d", r / o_.ranks_per_host));
      }
    }
    return {"herd", std::move(children), spec.timeout + std::chrono::seconds(15)};
  }

  std::string MpiExe() const { return o_.tool_dir + "/herd-bench-mpi"; }
  std::string GlooExe() const { return o_.tool_dir + "/herd-bench-gloo"; }

  // Why a peer cannot run here, or "".
  std::string MpiMissing() const {
    if (access(MpiExe().c_str(), X_OK) != 0) {
      return absl::StrFormat("%s is not built (configure herd where MPI is found)", MpiExe());
    }
    if (!OnPath("mpirun")) return "mpirun is not on PATH (Debian: openmpi-bin)";
    return "";
  }
  std::string GlooMissing() const {
    if (access(GlooExe().c_str(), X_OK) != 0) {
      return absl::StrFormat("%s is not built (configure herd where Gloo is found)", GlooExe());
    }
    return "";
  }

  Run MpiRun(const SweepSpec& spec) {
    // mpirun needs a little longer to start its ranks than our own processes.
    Run run{"mpi", {}, spec.timeout + std::chrono::seconds(30)};
    ChildSpec c{.name = "mpirun",
                .argv = {"mpirun", "-np", Str(o_.ranks), "--oversubscribe", MpiExe()}};
    const std::vector<std::string> sweep = SweepArgs(spec);
    c.argv.insert(c.argv.end(), sweep.begin(), sweep.end());
    c.env = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"};
    // SIGTERM lets mpirun take its ranks down with it if the driver dies.
    c.death_signal = SIGTERM;
    run.children.push_back(std::move(c));
    return run;
  }

  Run GlooRun(const SweepSpec& spec, const std::string& store) {
    std::error_code ec;
    std::filesystem::create_directories(store, ec);
    std::vector<std::string> argv = SweepArgs(spec);
    argv.insert(argv.begin(), GlooExe());
    return {"gloo", RankChildren("gloo", argv, o_.ranks, store),
            spec.timeout + std::chrono::seconds(15)};
  }

  static bool OnPath(const std::string& program) {
    const char* path = std::getenv("PATH");
    if (path == nullptr) return false;
    for (absl::string_view dir : absl::StrSplit(path, ':')) {
      const std::string candidate = absl::StrFormat("%s/%s", std::string(dir), program);
      if (access(candidate.c_str(), X_OK) == 0) return true;
    }
    return false;
  }

  // Runs one implementation's processes to the end; false when it failed or was interrupted.
  bool Execute(const Run& run) {
    SuperviseOptions options;
    options.silence_timeout = run.silence_timeout;
    options.on_stdout_line = [&](size_t child, std::string_view line) { OnLine(run, child, line); };
    auto outcome = Supervise(run.children, options);
    if (!outcome.ok()) {
      failed_ = true;
      notes_.push_back(absl::StrFormat("%s: could not run: %s", run.name,
                                       std::string(outcome.status().message())));
      Error(notes_.back());
      return false;
    }
    if (outcome->interrupt_signal != 0) {
      interrupted_ = outcome->interrupt_signal;
      Error(absl::StrFormat("%s: %s", run.name, outcome->Describe()));
      return false;
    }
    if (!outcome->ok()) {
      failed_ = true;
      notes_.push_back(absl::StrFormat("%s: FAILED: %s", run.name, outcome->Describe()));
      Error(notes_.back());
      return false;
    }
    return true;
  }

  void OnLine(const Run& run, size_t child, std::string_view line) {
    const std::string& label = run.children[child].name;
    if (line.empty() || line.front() != '{') {
      // mpirun and the MPI library may print banners on stdout: they are not results.
      std::fprintf(stderr, "[%s] %.*s\n", label.c_str(), static_cast<int>(line.size()),
                   line.data());
      return;
    }
    if (auto object = json::ParseObject(line); object.ok() && object->Has(kProgressKey)) {
      return;  // a heartbeat: it already reset the silence watchdog
    }
    auto result = ParseResultLine(line);
    if (!result.ok()) {
      Error(absl::StrFormat("%s printed an unreadable result: %s", label,
                            std::string(result.status().message())));
      failed_ = true;
      return;
    }
    if (o_.json && o_.rounds == 1) {
      std::printf("%s\n", ToJsonLine(*result).c_str());
      std::fflush(stdout);
    } else {
      absl::FPrintF(
          stderr, "  %-4s %-14s %-24s %7s  %s\n", result->impl, result->op, result->algo,
          FormatByteSize(result->requested_bytes),
          result->measured()
              ? absl::StrFormat("%10.1f us %8.3f GB/s%s", result->time_us, result->algbw_GBps(),
                                result->check == kCheckFailed ? "  CHECK FAILED" : "")
              : "n/a: " + result->detail);
    }
    results_.push_back(std::move(*result));
  }

  const CollectivesBenchOptions& o_;
  std::vector<BenchResult> results_;
  std::vector<std::string> notes_;
  bool failed_ = false;
  int interrupted_ = 0;
};

}  // namespace

absl::StatusOr<std::vector<std::string>> ParsePeerList(std::string_view csv) {
  if (csv == "none" || csv.empty()) return std::vector<std::string>{};
  return ParseCsv<std::string>(csv, [](std::string_view name) -> absl::StatusOr<std::string> {
    if (name == "mpi" || name == "gloo") return std::string(name);
    return absl::InvalidArgumentError(
        absl::StrFormat("unknown peer '%s'; expected mpi, gloo or none", name));
  });
}

int RunCollectivesRank(const RankFlags& flags, const SweepSpec& spec, transport::UcxOptions ucx) {
  ucx.prefix = "bench";
  ucx.bootstrap_timeout = spec.timeout;
  return RunRank(flags, ucx, [&](transport::Communicator& comm) {
    // One line per result and per heartbeat, flushed at once: the driver's watchdog counts
    // lines as signs of life.
    return RunHerdSweep(
        comm, spec, [](const BenchResult& r) { PrintLine(ToJson(r)); },
        [](const std::string& what) { PrintLine(json::Object().Add(kProgressKey, what)); });
  });
}

int RunCollectivesBench(const CollectivesBenchOptions& options) { return Driver(options).Main(); }

}  // namespace herd::bench
