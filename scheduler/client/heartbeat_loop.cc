#include "scheduler/client/heartbeat_loop.h"

#include <algorithm>
#include <chrono>

#include "common/logging.h"
#include "metrics/process_metrics.h"

namespace herd::scheduler {

HeartbeatLoop::HeartbeatLoop(SchedulerClient& client, std::string job,
                             const herd::v1::RegisterNodeResponse& registered, std::string what,
                             OnAnswer on_answer, Fill fill) {
  const auto interval =
      std::chrono::milliseconds(std::max<int64_t>(registered.heartbeat_interval_ms(), 50));
  herd::v1::HeartbeatRequest req;
  req.set_job(std::move(job));
  req.set_node_id(registered.node_id());
  thread_ = std::thread([this, &client, base = std::move(req), interval, what = std::move(what),
                         on_answer = std::move(on_answer), fill = std::move(fill)] {
    while (!stopping_.load()) {
      herd::v1::HeartbeatRequest req = base;
      if (fill) fill(req);
      auto resp = client.Heartbeat(req);
      if (!resp.ok()) {
        metrics::ProcessMetrics::Get().heartbeats_missed().Increment();
        Log().warn("{}: heartbeat: {}", what, resp.status().ToString());
      } else if (on_answer) {
        on_answer(*resp);
      }
      // Short sleeps, so destruction does not wait a whole interval.
      for (auto slept = std::chrono::milliseconds(0); slept < interval && !stopping_.load();
           slept += std::chrono::milliseconds(20)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  });
}

HeartbeatLoop::~HeartbeatLoop() {
  stopping_ = true;
  thread_.join();
}

}  // namespace herd::scheduler
