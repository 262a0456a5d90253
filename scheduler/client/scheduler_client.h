#pragma once
// A client of herd.v1.Scheduler for processes and the CLI: one method per RPC, absl::Status
// out (the scheduler's gRPC code and message, prefixed with its address). Adds the bearer
// token to every call and gives every call a deadline.
//
// Each client is a witness of the scheduler's state (scheduler/state_sequence.h): it keeps the
// highest `state_seq` of the answers it got and puts it in every request that has a
// `seen_state_seq` (RegisterNode, Heartbeat, GetPlan, ReportIteration, Follow), so a scheduler that
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
  // Clients with the same id (and address) share one connection; another id opens its own (a
  // benchmark's simulated processes, several to a connection).
  int channel_id = 0;
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
  // The job without what grows with its size (GetJobRequest.brief): its spec and state.
  virtual absl::StatusOr<herd::v1::JobStatus> GetJobBrief(const std::string& name) = 0;
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
  // A Follow stream, callback style (scheduler/client/follower.h uses it): no thread waits on
  // it, so a process can follow many (a benchmark's simulated workers).
  class FollowHandler {
   public:
    virtual ~FollowHandler() = default;
    // gRPC's threads call these; OnEnded comes last, once, and nothing comes after it.
    virtual void OnEvent(const herd::v1::FollowEvent& event) = 0;
    virtual void OnWritten(bool ok) = 0;  // the Write before it is done (false: the stream broke)
    virtual void OnEnded(const absl::Status& status) = 0;
  };
  class FollowCall {
   public:
    virtual ~FollowCall() = default;
    // One write at a time: the next after OnWritten. The message is copied. Safe from any
    // thread: false (nothing started, no OnWritten) once the stream is ending, so a write
    // taken just before the end never reaches a call that gRPC has finished.
    virtual bool Write(const herd::v1::FollowRequest& msg) = 0;
    virtual void Cancel() = 0;  // OnEnded follows (CANCELLED)
  };
  // Opens a stream whose events go to `handler`, which must outlive its OnEnded. No deadline:
  // it lasts the process's life.
  virtual std::shared_ptr<FollowCall> StartFollow(FollowHandler* handler) = 0;
  // grpc.health.v1 Check of the whole server: OK when it serves.
  virtual absl::Status CheckHealth() = 0;
  // The highest state_seq this client heard (0: none yet).
  virtual uint64_t SeenStateSeq() const = 0;
  // A state_seq heard outside the unary answers (a Follow event).
  virtual void HearStateSeq(uint64_t seq) = 0;
};

}  // namespace herd::scheduler
