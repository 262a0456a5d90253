#pragma once
// The store traffic of building one communicator, against a real `herd scheduler`: N simulated
// ranks, speaking the real protocol through the same client library and scheduler store as
// `herd worker` (scheduler/client, worker/scheduler_store.h), each publish a UCX-sized record
// and then read the records a UCX rank reads (transport/ucx/bootstrap_peers.h). Two protocols:
//
//   kGetMany   (today's): 1 StoreSet + 1 StoreGetMany of the rank's bootstrap peers;
//   kPerPeerGet (before StoreGetMany): 1 StoreSet + one StoreGet per other rank, P - 1.
//
// Every rank publishes first and reads once all have published, so no read waits: what is
// measured is the traffic and the scheduler's work for it, not how late ranks arrive. Calls are
// counted on the client (CountingSchedulerClient), so retries would show. The scheduler's CPU
// is read from /proc/<pid>/stat when its pid is given (the caller started it).
//
// For the quadratic protocol at large N (16.8 M calls at 4,096 ranks) `read_ranks` lets a
// sample of the ranks read; the per-rank figures are measured on that sample and the
// scheduler's CPU for the read phase is scaled by ranks / read_ranks (the JSON says so).
//
// The lead folds this into `herd bench control-plane` (bootstrap_rpcs_per_rank).

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/client/scheduler_client.h"

namespace herd::bench {

// Forwards every call to `inner` and counts the store calls, so a test or a benchmark sees how
// many RPCs a Store made (all its users together).
class CountingSchedulerClient final : public scheduler::SchedulerClient {
 public:
  explicit CountingSchedulerClient(std::shared_ptr<scheduler::SchedulerClient> inner)
      : inner_(std::move(inner)) {}

  std::atomic<int64_t> store_sets{0}, store_gets{0}, store_get_manys{0};
  std::atomic<int64_t> others{0};  // every other call

  absl::StatusOr<herd::v1::RegisterNodeResponse> RegisterNode(
      const herd::v1::RegisterNodeRequest& req) override;
  absl::StatusOr<herd::v1::HeartbeatResponse> Heartbeat(
      const herd::v1::HeartbeatRequest& req) override;
  absl::StatusOr<herd::v1::JobStatus> SubmitJob(const herd::v1::JobSpec& spec) override;
  absl::StatusOr<herd::v1::JobStatus> GetJob(const std::string& name) override;
  absl::StatusOr<herd::v1::JobStatus> GetJobBrief(const std::string& name) override;
  absl::StatusOr<herd::v1::ListJobsResponse> ListJobs() override;
  absl::StatusOr<herd::v1::JobStatus> SetMode(const herd::v1::SetModeRequest& req) override;
  absl::StatusOr<herd::v1::JobStatus> CancelJob(const std::string& name,
                                                const std::string& reason) override;
  absl::Status DeleteJob(const std::string& name) override;
  absl::StatusOr<herd::v1::JobStatus> DeclareModel(
      const herd::v1::DeclareModelRequest& req) override;
  absl::StatusOr<herd::v1::JobStatus> FinishWorker(
      const herd::v1::FinishWorkerRequest& req) override;
  absl::StatusOr<herd::v1::JobStatus> FailJob(const herd::v1::FailJobRequest& req) override;
  absl::StatusOr<herd::v1::Plan> GetPlan(const herd::v1::GetPlanRequest& req) override;
  absl::Status WatchPlan(const herd::v1::WatchPlanRequest& req, Deadline deadline,
                         const std::function<bool(const herd::v1::Plan&)>& on_plan) override;
  absl::StatusOr<herd::v1::BarrierResponse> Barrier(const herd::v1::BarrierRequest& req,
                                                    Deadline deadline) override;
  absl::StatusOr<herd::v1::ReportIterationResponse> ReportIteration(
      const herd::v1::ReportIterationRequest& req) override;
  absl::Status StoreSet(const std::string& job, const std::string& key,
                        const std::string& value) override;
  absl::StatusOr<std::string> StoreGet(const std::string& job, const std::string& key,
                                       Deadline deadline) override;
  absl::StatusOr<herd::v1::StoreGetManyResponse> StoreGetMany(const std::string& job,
                                                              const std::vector<std::string>& keys,
                                                              Deadline deadline,
                                                              bool partial) override;
  absl::StatusOr<herd::v1::CheckpointRecord> RequestCheckpoint(
      const herd::v1::RequestCheckpointRequest& req) override;
  absl::StatusOr<herd::v1::ReportCheckpointResponse> ReportCheckpoint(
      const herd::v1::ReportCheckpointRequest& req) override;
  std::shared_ptr<FollowCall> StartFollow(FollowHandler* handler) override;
  absl::Status CheckHealth() override;
  uint64_t SeenStateSeq() const override;
  void HearStateSeq(uint64_t seq) override;

 private:
  std::shared_ptr<scheduler::SchedulerClient> inner_;
};

enum class BootstrapProtocol { kGetMany, kPerPeerGet };

struct BootstrapLoadOptions {
  std::string scheduler_address;  // host:port of a running `herd scheduler`
  std::string token;              // its bearer token, if any
  int ranks = 64;
  BootstrapProtocol protocol = BootstrapProtocol::kGetMany;
  size_t record_bytes = 250;  // a UCX worker address record over TCP + shared memory
  // Ranks that read (0: all). The others only publish.
  int read_ranks = 0;
  int client_threads = 16;  // simulated ranks in flight at once
  int channels = 4;         // gRPC channels they share
  pid_t scheduler_pid = 0;  // > 0: measure its CPU from /proc
  std::chrono::seconds timeout{900};
};

struct BootstrapLoadResult {
  int ranks = 0;
  BootstrapProtocol protocol = BootstrapProtocol::kGetMany;
  int read_ranks = 0;              // ranks that read (the sample)
  double rpcs_per_rank = 0;        // store calls of one rank that publishes and reads
  double bytes_read_per_rank = 0;  // record bytes one reading rank received
  double publish_seconds = 0;      // wall time: every rank's Set
  double read_seconds = 0;         // wall time: the reads (of the sample)
  // The scheduler's CPU (user + system), -1 when not measured; the read phase's is scaled to
  // every rank reading when a sample read (scheduler_cpu_scaled).
  double scheduler_cpu_publish_seconds = -1;
  double scheduler_cpu_read_seconds = -1;
  bool scheduler_cpu_scaled = false;
  double scheduler_cpu_per_call_us = -1;  // over every call measured
};

// Submits a job of `ranks` workers for the store (and cancels it after), runs the two phases
// and returns the figures. Fails on any error of a call, naming the rank.
absl::StatusOr<BootstrapLoadResult> BootstrapLoad(const BootstrapLoadOptions& options);

// One JSON line: {"bench":"bootstrap_load","protocol":"get_many","ranks":...}.
std::string BootstrapLoadJson(const BootstrapLoadResult& result);

std::string_view BootstrapProtocolName(BootstrapProtocol protocol);

}  // namespace herd::bench
