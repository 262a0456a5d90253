#include "bench/emulator/measure.h"

#include <cstdio>

#include "absl/strings/str_format.h"
#include "bench/emulator/temp_dir.h"
#include "bench/process_group.h"
#include "common/status.h"

namespace herd::emulator {

absl::StatusOr<std::vector<std::string>> RunInCluster(const Cluster& cluster,
                                                      const std::string& label,
                                                      const std::vector<std::string>& argv,
                                                      std::chrono::seconds silence_timeout) {
  HERD_ASSIGN_OR_RETURN(TempDir store, TempDir::Create("herd-emu-store"));
  std::vector<bench::ChildSpec> children;
  for (int r = 0; r < cluster.ranks(); ++r) {
    std::vector<std::string> args = argv;
    for (std::string a :
         {std::string("--rank"), absl::StrFormat("%d", r), std::string("--ranks"),
          absl::StrFormat("%d", cluster.ranks()), std::string("--store"), store.path()}) {
      args.push_back(std::move(a));
    }
    children.push_back(cluster.Launch(r, absl::StrFormat("%s rank %d", label, r), args));
  }
  bench::RunOptions run;
  run.silence_timeout = silence_timeout;
  std::vector<std::string> results;
  run.on_stdout_line = [&](size_t child, std::string_view line) {
    if (child == 0 && line.starts_with("{")) {
      results.emplace_back(line);
    } else {
      std::fprintf(stderr, "[%s] %.*s\n", children[child].label.c_str(),
                   static_cast<int>(line.size()), line.data());
    }
  };
  HERD_ASSIGN_OR_RETURN(const bench::GroupOutcome outcome, bench::RunProcessGroup(children, run));
  if (!outcome.ok()) {
    return absl::InternalError(
        absl::StrFormat("%s in the emulated cluster: %s", label, outcome.Describe()));
  }
  if (results.empty()) {
    return absl::InternalError(absl::StrFormat("%s: rank 0 exited without a result line", label));
  }
  return results;
}

absl::StatusOr<ProbeResult> MeasureInCluster(const Cluster& cluster, const std::string& exe,
                                             ProbeOptions probe) {
  // The probes print nothing until they are done: the silence timeout is the probe's own.
  HERD_ASSIGN_OR_RETURN(const std::vector<std::string> lines,
                        RunInCluster(cluster, probe.probe,
                                     {exe, "probe-rank", "--probe", probe.probe, "--bytes",
                                      absl::StrFormat("%d", probe.bytes), "--iters",
                                      absl::StrFormat("%d", probe.iters), "--warmup",
                                      absl::StrFormat("%d", probe.warmup), "--density",
                                      absl::StrFormat("%.17g", probe.density), "--timeout",
                                      absl::StrFormat("%d", probe.timeout.count())},
                                     probe.timeout + std::chrono::seconds(30)));
  return ParseProbeResult(lines.front());
}

}  // namespace herd::emulator
