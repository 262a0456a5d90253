#include "bench/emulator/measure.h"

#include <cstdio>
#include <optional>

#include "absl/strings/str_format.h"
#include "bench/emulator/temp_dir.h"
#include "bench/process_group.h"
#include "common/status.h"

namespace herd::emulator {

absl::StatusOr<ProbeResult> MeasureInCluster(const Cluster& cluster, const std::string& exe,
                                             ProbeOptions probe) {
  HERD_ASSIGN_OR_RETURN(TempDir store, TempDir::Create("herd-emu-store"));
  std::vector<bench::ChildSpec> children;
  for (int r = 0; r < cluster.ranks(); ++r) {
    children.push_back(cluster.Launch(
        r, absl::StrFormat("%s rank %d", probe.probe, r),
        {exe, "probe-rank", "--probe", probe.probe, "--rank", absl::StrFormat("%d", r), "--ranks",
         absl::StrFormat("%d", cluster.ranks()), "--store", store.path(), "--bytes",
         absl::StrFormat("%d", probe.bytes), "--iters", absl::StrFormat("%d", probe.iters),
         "--warmup", absl::StrFormat("%d", probe.warmup), "--timeout",
         absl::StrFormat("%d", probe.timeout.count())}));
  }
  bench::RunOptions run;
  // The probes print nothing until they are done: the silence timeout is the probe's own.
  run.silence_timeout = probe.timeout + std::chrono::seconds(30);
  std::optional<absl::StatusOr<ProbeResult>> result;
  run.on_stdout_line = [&](size_t child, std::string_view line) {
    // Only rank 0's JSON line is the result; anything else it prints is passed on.
    if (child == 0 && !result.has_value() && line.starts_with("{")) {
      result = ParseProbeResult(line);
    } else {
      std::fprintf(stderr, "[%s] %.*s\n", children[child].label.c_str(),
                   static_cast<int>(line.size()), line.data());
    }
  };
  HERD_ASSIGN_OR_RETURN(const bench::GroupOutcome outcome, bench::RunProcessGroup(children, run));
  if (!outcome.ok()) {
    return absl::InternalError(
        absl::StrFormat("%s probe in the emulated cluster: %s", probe.probe, outcome.Describe()));
  }
  if (!result.has_value()) {
    return absl::InternalError(
        absl::StrFormat("%s probe: rank 0 exited without a result line", probe.probe));
  }
  return *result;
}

}  // namespace herd::emulator
