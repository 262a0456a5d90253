#include "bench/control_plane/control_plane_bench.h"

#include <cstdio>

#include "absl/strings/str_format.h"
#include "bench/control_plane/scheduler_process.h"
#include "bench/control_plane/sim.h"
#include "common/status.h"

namespace herd::bench::control_plane {
namespace {

std::string Json(const SimResult& r) {
  return absl::StrFormat(
      R"({"protocol":"%s","workers":%d,"iterations":%d,"rate_achieved":%.2f,)"
      R"("rpcs_per_worker_iteration":%.4f,"bytes_per_worker_iteration":%.1f,)"
      R"("down_messages_per_worker_iteration":%.4f,"scheduler_cpu_cores":%.3f,)"
      R"("scheduler_rss_mib":%.1f,"stall_p50_ms":%.3f,"stall_p99_ms":%.3f,"stall_max_ms":%.3f,)"
      R"("register_s":%.3f,"membership_change_s":%.3f,"mode_switch_s":%.3f,)"
      R"("switched_together":%s,"bootstrap_rpcs_per_rank":%.2f})",
      r.protocol, r.workers, r.iterations, r.achieved_rate, r.rpcs_per_worker_iteration,
      r.bytes_per_worker_iteration, r.down_messages_per_worker_iteration, r.scheduler_cpu_cores,
      r.scheduler_rss_mib, r.stall_p50_ms, r.stall_p99_ms, r.stall_max_ms, r.register_s,
      r.membership_change_s, r.mode_switch_s, r.switched_together ? "true" : "false",
      r.bootstrap_rpcs_per_rank);
}

}  // namespace

absl::Status RunControlPlaneBench(const BenchOptions& o) {
  if (!o.json) {
    std::printf("%-8s %7s %9s %11s %11s %8s %8s %9s %9s %9s %9s %9s\n", "protocol", "workers",
                "it/s", "rpc/w-it", "bytes/w-it", "cpu", "rss MiB", "stall p99", "register",
                "member", "switch", "together");
  }
  for (const std::string& protocol : o.protocols) {
    if (protocol != "follow" && protocol != "legacy") {
      return absl::InvalidArgumentError(
          absl::StrFormat("--protocols: '%s' is not follow or legacy", protocol));
    }
    for (int n : o.workers) {
      SchedulerProcessOptions sp;
      sp.binary = protocol == "legacy" && !o.legacy_scheduler_binary.empty()
                      ? o.legacy_scheduler_binary
                      : o.scheduler_binary;
      sp.heartbeat_timeout = o.heartbeat_timeout;
      HERD_ASSIGN_OR_RETURN(auto scheduler, SchedulerProcess::Start(sp));
      SimOptions s;
      s.scheduler = scheduler->address();
      s.workers = n;
      s.iterations = o.iterations;
      s.rate = o.rate;
      s.ucx_address_bytes = o.ucx_address_bytes;
      s.heartbeat_timeout = o.heartbeat_timeout;
      s.changes = o.changes;
      SchedulerGauges g{[&] { return scheduler->CpuSeconds(); },
                        [&] { return scheduler->RssMib(); }};
      absl::StatusOr<SimResult> r = protocol == "follow" ? RunFollowSim(s, g) : RunLegacySim(s, g);
      if (!r.ok()) {
        std::fprintf(stderr, "herd bench control-plane: %s, %d workers: %s\n", protocol.c_str(), n,
                     r.status().ToString().c_str());
        continue;
      }
      if (o.json) {
        std::printf("%s\n", Json(*r).c_str());
      } else {
        std::printf("%-8s %7d %9.2f %11.4f %11.1f %8.3f %8.1f %9.3f %9.3f %9.3f %9.3f %9s\n",
                    r->protocol.c_str(), r->workers, r->achieved_rate, r->rpcs_per_worker_iteration,
                    r->bytes_per_worker_iteration, r->scheduler_cpu_cores, r->scheduler_rss_mib,
                    r->stall_p99_ms, r->register_s, r->membership_change_s, r->mode_switch_s,
                    r->switched_together ? "yes" : "no");
      }
      std::fflush(stdout);
    }
  }
  return absl::OkStatus();
}

}  // namespace herd::bench::control_plane
