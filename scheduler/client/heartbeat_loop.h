#pragma once
// Keeps a registered node alive with the scheduler: a thread that sends Heartbeat at the
// interval RegisterNode gave, until destroyed. A failed heartbeat is logged and retried at the
// next interval (the scheduler may be restarting); the scheduler declares the node dead only
// after its heartbeat timeout. Each answer (the job's state and epoch) goes to `on_answer`
// when one is given, on the loop's thread: how a process blocked in a collective learns
// within a heartbeat that its job ended. `fill`, when given, adds to each request what the
// node reports (a shard: the version it has on disk), on the loop's thread.

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "herd/v1/scheduler.pb.h"
#include "scheduler/client/scheduler_client.h"

namespace herd::scheduler {

class HeartbeatLoop {
 public:
  // `what` names the process in the logs ("server", "worker 3").
  using OnAnswer = std::function<void(const herd::v1::HeartbeatResponse&)>;
  using Fill = std::function<void(herd::v1::HeartbeatRequest&)>;
  HeartbeatLoop(SchedulerClient& client, std::string job,
                const herd::v1::RegisterNodeResponse& registered, std::string what,
                OnAnswer on_answer = nullptr, Fill fill = nullptr);
  ~HeartbeatLoop();
  HeartbeatLoop(const HeartbeatLoop&) = delete;
  HeartbeatLoop& operator=(const HeartbeatLoop&) = delete;

 private:
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace herd::scheduler
