#pragma once
// A client of herd.v1.Scheduler for processes and the CLI: one method per RPC, absl::Status
// out (the scheduler's gRPC code and message, prefixed with its address). Adds the bearer
// token to every call and gives every call a deadline.
//
// Each client is a witness of the scheduler's state (scheduler/state_sequence.h): it keeps the
// highest `state_seq` of the answers it got and puts it in every request that has a
// `seen_state_seq` (RegisterNode, Heartbeat, GetPlan, ReportIteration), so a scheduler that
// restarted on a state missing what it acknowledged to this process refuses with DATA_LOSS.
//
// gRPC headers stay inside scheduler_client.cc. Thread-safe: calls may run concurrently.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/deadline.h"
#include "herd/v1/scheduler.pb.h"

namespace herd::scheduler {

struct ClientOptions {
  std::string address;      // host:port of the scheduler
  std::string token;        // bearer token (empty: none)
  bool tls = false;         // connect with TLS
  std::string tls_ca_file;  // PEM roots that sign the scheduler's certificate (empty: system)
  // The deadline of a call that does not block (everything but Barrier, StoreGet, StoreGetMany,
  // WatchPlan).
  std::chrono::milliseconds call_timeout{10000};
};

class SchedulerClient {
 public:
  // Creates the channel (it connects lazily, on the first call). INVALID_ARGUMENT for an
  // empty address or an unreadable CA file.
  static absl::StatusOr<std::unique_ptr<SchedulerClient>> Connect(const ClientOptions& options);
  virtual ~SchedulerClient() = default;

  virtual absl::StatusOr<herd::v1::RegisterNodeResponse> RegisterNode(
      const herd::v1::RegisterNodeRequest& req) = 0;
  virtual absl::StatusOr<herd::v1::HeartbeatResponse> Heartbeat(
      const herd::v1::HeartbeatRequest& req) = 0;
  virtual absl::StatusOr<herd::v1::JobStatus> SubmitJob(const herd::v1::JobSpec& spec) = 0;
  virtual absl::StatusOr<herd::v1::JobStatus> GetJob(const std::string& name) = 0;
  virtual absl::StatusOr<herd::v1::ListJobsResponse> ListJobs() = 0;
  virtual absl::StatusOr<herd::v1::JobStatus> SetMode(const herd::v1::SetModeRequest& req) = 0;
  virtual absl::StatusOr<herd::v1::JobStatus> CancelJob(const std::string& name,
                                                        const std::string& reason) = 0;
  virtual absl::Status DeleteJob(const std::string& name) = 0;
  virtual absl::StatusOr<herd::v1::JobStatus> DeclareModel(
      const herd::v1::DeclareModelRequest& req) = 0;
  virtual absl::StatusOr<herd::v1::JobStatus> FinishWorker(
      const herd::v1::FinishWorkerRequest& req) = 0;
  virtual absl::StatusOr<herd::v1::JobStatus> FailJob(const herd::v1::FailJobRequest& req) = 0;
  virtual absl::StatusOr<herd::v1::Plan> GetPlan(const herd::v1::GetPlanRequest& req) = 0;
  // Streams plans until `on_plan` returns false, the job ends, the stream fails or
  // the deadline passes (then OK: the caller asked to watch for that long).
  virtual absl::Status WatchPlan(const herd::v1::WatchPlanRequest& req, Deadline deadline,
                                 const std::function<bool(const herd::v1::Plan&)>& on_plan) = 0;
  virtual absl::StatusOr<herd::v1::BarrierResponse> Barrier(const herd::v1::BarrierRequest& req,
                                                            Deadline deadline) = 0;
  virtual absl::StatusOr<herd::v1::ReportIterationResponse> ReportIteration(
      const herd::v1::ReportIterationRequest& req) = 0;
  virtual absl::Status StoreSet(const std::string& job, const std::string& key,
                                const std::string& value) = 0;
  virtual absl::StatusOr<std::string> StoreGet(const std::string& job, const std::string& key,
                                               Deadline deadline) = 0;
  // Several keys in one call, waiting until `deadline` for all of them (StoreGetManyRequest:
  // with `partial`, an answer at the deadline lists the keys still missing instead of failing).
  virtual absl::StatusOr<herd::v1::StoreGetManyResponse> StoreGetMany(
      const std::string& job, const std::vector<std::string>& keys, Deadline deadline,
      bool partial = false) = 0;
  virtual absl::StatusOr<herd::v1::CheckpointRecord> RequestCheckpoint(
      const herd::v1::RequestCheckpointRequest& req) = 0;
  virtual absl::StatusOr<herd::v1::ReportCheckpointResponse> ReportCheckpoint(
      const herd::v1::ReportCheckpointRequest& req) = 0;
  // grpc.health.v1 Check of the whole server: OK when it serves.
  virtual absl::Status CheckHealth() = 0;
  // The highest state_seq this client heard (0: none yet).
  virtual uint64_t SeenStateSeq() const = 0;
};

}  // namespace herd::scheduler
