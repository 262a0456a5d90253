#pragma once
// The scheduler's logic, without gRPC: jobs, membership, failure detection, epochs, plans,
// barriers and the bootstrap store of each job, persisted in a StateDb. The gRPC service
// (service.h) is a thin edge over this class; the unit tests drive it directly.
//
// Threading: every public method may be called from any thread. One mutex guards the state;
// the blocking calls (Barrier, WaitForEpoch, StoreGet) wait on a condition variable with a
// deadline. A background thread declares nodes dead when their heartbeats stop.
//
// Errors: every method validates its request first and changes nothing when it fails.
// INVALID_ARGUMENT (malformed), NOT_FOUND (unknown job or node), ALREADY_EXISTS (duplicate
// name), FAILED_PRECONDITION (stale epoch, iteration from the past, dead node, cancelled
// job, a mode the job cannot run), DEADLINE_EXCEEDED (a wait ran out), ABORTED (the epoch changed
// during a barrier), UNAVAILABLE (the scheduler is shutting down), DATA_LOSS (a process proved
// that the recovered state lacks changes the scheduler acknowledged: from then on every call
// answers it, see witness.cc).

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "common/deadline.h"
#include "herd/v1/scheduler.pb.h"
#include "metrics/history.h"
#include "scheduler/state_db.h"

namespace herd::scheduler {

struct SchedulerOptions {
  // RocksDB directory (created if missing); STATE/history/JOB.jsonl holds each job's
  // per-iteration history (docs/metrics.md).
  std::string state_dir;
  // A node whose last heartbeat is older than this is declared dead.
  std::chrono::milliseconds heartbeat_timeout{10000};
  // Open a damaged state at its last consistent point instead of refusing it with DATA_LOSS,
  // and serve a state that a process proves went back in time (witness.cc) instead of
  // refusing it.
  bool accept_data_loss = false;
  // Below the state's owner-only layer: the local disk when null (tests: a FaultFileSystem).
  std::shared_ptr<rocksdb::FileSystem> file_system;
};

class SchedulerCore {
 public:
  // Opens the state in options.state_dir and resumes every job in it. Nodes that were alive
  // get one full heartbeat timeout from now to reconnect before they are declared dead.
  static absl::StatusOr<std::unique_ptr<SchedulerCore>> Open(SchedulerOptions options);
  ~SchedulerCore();  // Shutdown() and joins the failure detector

  // Wakes every blocked call with UNAVAILABLE; later blocking calls fail at once.
  void Shutdown();

  // Membership (membership.cc).
  absl::StatusOr<herd::v1::RegisterNodeResponse> RegisterNode(
      const herd::v1::RegisterNodeRequest& req);
  absl::StatusOr<herd::v1::HeartbeatResponse> Heartbeat(const herd::v1::HeartbeatRequest& req);
  // One pass of the failure detector (the background thread runs it every timeout/10).
  void DetectFailures();

  // Jobs.
  absl::StatusOr<herd::v1::JobStatus> SubmitJob(const herd::v1::JobSpec& spec);
  absl::StatusOr<herd::v1::JobStatus> GetJob(std::string_view name);
  std::vector<herd::v1::JobStatus> ListJobs();
  // One page of jobs by name: those after `after` ("" for the first), at least one, then while
  // the page's serialized size stays within `max_bytes`. next_page_token is "" on the last page.
  struct JobPage {
    std::vector<herd::v1::JobStatus> jobs;
    std::string next_page_token;
  };
  JobPage ListJobs(std::string_view after, size_t max_bytes);
  absl::StatusOr<herd::v1::JobStatus> SetMode(const herd::v1::SetModeRequest& req);

  // The job's life after submission (lifecycle.cc): a terminal state (COMPLETED, FAILED,
  // CANCELLED) bumps the epoch so every process hears it, and drops the bootstrap store.
  absl::StatusOr<herd::v1::JobStatus> CancelJob(std::string_view name, std::string_view reason);
  // A worker declares its model's layout (sets the job's when the spec listed none; must match
  // it otherwise: FAILED_PRECONDITION names the first tensor that differs) and its planned
  // iteration count.
  absl::StatusOr<herd::v1::JobStatus> DeclareModel(const herd::v1::DeclareModelRequest& req);
  // A worker finished its iterations; when every worker has, the job is COMPLETED.
  absl::StatusOr<herd::v1::JobStatus> FinishWorker(const herd::v1::FinishWorkerRequest& req);
  // A process met an error it cannot recover from: the job is FAILED (the first ending wins;
  // a job that already ended is returned as it is).
  absl::StatusOr<herd::v1::JobStatus> FailJob(const herd::v1::FailJobRequest& req);
  // Forgets a job that has ended, so its name can be used again. FAILED_PRECONDITION for a
  // job that has not ended (cancel it first).
  absl::Status DeleteJob(std::string_view name);

  // Plans, progress and synchronisation (sync.cc).
  absl::StatusOr<herd::v1::Plan> GetPlan(const herd::v1::GetPlanRequest& req);
  // Waits until the job's epoch exceeds `after_epoch` and returns the plan of the new epoch's
  // first iteration; std::nullopt when the deadline passes first. A job that ended answers
  // with its last plan at once (every ending bumps the epoch); the plan's job_state says so.
  absl::StatusOr<std::optional<herd::v1::Plan>> WaitForEpoch(std::string_view job,
                                                             uint64_t after_epoch,
                                                             Deadline deadline);
  absl::StatusOr<herd::v1::BarrierResponse> Barrier(const herd::v1::BarrierRequest& req,
                                                    Deadline deadline);
  absl::StatusOr<herd::v1::ReportIterationResponse> ReportIteration(
      const herd::v1::ReportIterationRequest& req);
  absl::Status StoreSet(std::string_view job, std::string_view key, std::string_view value);
  absl::StatusOr<std::string> StoreGet(std::string_view job, std::string_view key,
                                       Deadline deadline);
  // Several keys in one call (StoreGetMany): waits until every key of `req` is set and answers
  // their values in order. At the deadline DEADLINE_EXCEEDED names the keys still missing, or,
  // with req.partial, the answer holds the values set and the positions of the others.
  // INVALID_ARGUMENT for no keys, more than limits::kMaxStoreGetManyKeys or a bad key;
  // RESOURCE_EXHAUSTED when the values would pass limits::kMaxStoreGetManyAnswerBytes.
  absl::StatusOr<herd::v1::StoreGetManyResponse> StoreGetMany(
      const herd::v1::StoreGetManyRequest& req, Deadline deadline);

  // Checkpoints (checkpoints.cc). RequestCheckpoint schedules one at the cut, the first
  // iteration no worker has begun (a pending one whose cut no worker has begun is answered
  // instead); ReportCheckpoint takes one process's file and, with the last one, commits the
  // checkpoint (checkpoint::Commit, outside the lock) and applies the retention policy. An
  // error report, a process that dies or the policy's timeout aborts the checkpoint; training
  // goes on and the reason is in JobStatus.failed_checkpoint.
  absl::StatusOr<herd::v1::CheckpointRecord> RequestCheckpoint(
      const herd::v1::RequestCheckpointRequest& req);
  absl::StatusOr<herd::v1::ReportCheckpointResponse> ReportCheckpoint(
      const herd::v1::ReportCheckpointRequest& req);
  // One pass over the pending checkpoints: aborts those past their timeout or missing a
  // process that died (the failure detector's thread runs it).
  void ExpireCheckpoints();

  std::chrono::milliseconds heartbeat_timeout() const { return options_.heartbeat_timeout; }

  // The state's witnesses (witness.cc). OK while the scheduler serves; DATA_LOSS once a
  // process proved that the state recovered at start lacks writes the scheduler had
  // acknowledged (scheduler/state_sequence.h). From then on every call answers that error,
  // nothing changes (no write, no death declared), and later starts refuse the state too until
  // one is given --accept-data-loss.
  absl::Status Refusal();
  // `fn` runs once, when the scheduler starts refusing (the gRPC edge reports NOT_SERVING).
  void OnRefusal(std::function<void()> fn);
  // The number of the state's newest write: answers carry it as state_seq.
  uint64_t StateSeq();

 private:
  // Where a node sits: its job, role and slot.
  struct NodeRef {
    std::string job;
    herd::v1::Role role = herd::v1::ROLE_UNSPECIFIED;
    int slot = 0;
  };
  struct BarrierState {
    std::set<uint64_t> arrived;
    uint64_t generation = 0;  // bumped at each release, so a name can be reused
  };
  struct Job {
    herd::v1::JobStatus status;
    std::vector<Clock::time_point> worker_seen, server_seen;  // last heartbeat, by slot
    std::map<std::string, BarrierState> barriers;             // by name (current epoch)
    std::map<std::string, std::string> kv;                    // bootstrap store
    bool committing = false;  // a checkpoint's files are being committed (outside the lock)
    size_t kv_bytes = 0;      // its keys and values
  };

  explicit SchedulerCore(SchedulerOptions options);
  absl::Status Load();
  void DetectorLoop();

  absl::StatusOr<Job*> FindJob(std::string_view name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The live-job lookup of every call that acts on a job: NOT_FOUND, or FAILED_PRECONDITION
  // for a job that has ended.
  absl::StatusOr<Job*> FindActiveJob(std::string_view name, std::string_view action)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The member `node_id` of `job`: NOT_FOUND when unknown, FAILED_PRECONDITION when dead.
  absl::StatusOr<herd::v1::Member*> FindLiveMember(Job& job, uint64_t node_id,
                                                   std::string_view action, NodeRef* ref)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stale or future epochs (0 means "current").
  static absl::Status CheckEpoch(const Job& job, uint64_t epoch, std::string_view action);

  // Starts a new epoch on `next` (a copy of a job's status): moves a PENDING job whose
  // processes are all there (and whose layout is known) to RUNNING, recomputes the completed
  // iteration and sets the epoch's first iteration to the one after it.
  static void AdvanceEpoch(herd::v1::JobStatus& next, std::string reason);
  // Ends the job in `next` with a terminal state and a new epoch (the caller commits it).
  static void EndJob(herd::v1::JobStatus& next, herd::v1::JobState state, std::string reason);
  // Keeps the durable version a server's heartbeat reports in its member (not synced: a
  // lower bound is enough, see server/recovery_check.h).
  void RecordDurableVersion(Job& job, int slot, const herd::v1::HeartbeatRequest& req)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Commits an ending built by EndJob and drops the job's bootstrap store.
  absl::Status CommitEnding(Job& job, herd::v1::JobStatus next) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Persists `next` and only then installs it, so a failed write changes nothing. When the
  // epoch changed, clears the barriers; wakes every waiter.
  absl::Status Commit(Job& job, herd::v1::JobStatus next, uint64_t next_node_id, bool sync)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Checkpoints (checkpoints.cc).
  // Starts checkpoint `cut` on `next` and announces it to the shards (a store key); the caller
  // commits `next`.
  absl::Status StartCheckpoint(Job& job, herd::v1::JobStatus& next, int64_t cut, std::string dir,
                               std::string trigger, bool preempt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The JobSpec's policy asks for a checkpoint at `iteration`, whose plan a worker is the first
  // to fetch (so no worker has begun it: a valid cut).
  bool PolicyWantsCheckpoint(const herd::v1::JobStatus& status, int64_t iteration) const;
  // Moves the pending checkpoint of `next` to failed_checkpoint with `why` (a preempted job
  // still ends).
  static void AbortCheckpoint(herd::v1::JobStatus& next, std::string why);
  // ReportCheckpoint without the answer's state_seq.
  absl::StatusOr<herd::v1::ReportCheckpointResponse> TakeCheckpointReport(
      const herd::v1::ReportCheckpointRequest& req);
  // Resolves JobSpec.resume_from into `status` (outside the lock: it reads the directory).
  static absl::Status ResolveResume(herd::v1::JobStatus& status);

  // Checks `seen`, the highest state sequence number the caller (`who`, or node `node_id` of
  // `job`) heard from this scheduler, against the recovered state: DATA_LOSS when the state
  // lacks it, unless options_.accept_data_loss (then logged). Also answers an earlier refusal.
  absl::Status HearWitness(uint64_t seen, std::string_view job, uint64_t node_id,
                           std::string who = "") ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // At start: a refusal recorded by an earlier start (StateDb::Contents::lost).
  absl::Status CheckRecordedLoss(const std::string& lost) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Waits on changed_ until notified or the deadline, in slices of at most a second (an
  // infinite deadline must not overflow the clock arithmetic of wait_until).
  void WaitChanged(std::unique_lock<std::mutex>& lock, Deadline deadline);

  const SchedulerOptions options_;
  std::unique_ptr<StateDb> db_;
  // Every job's per-iteration history, STATE/history/JOB.jsonl (metrics/history.h).
  std::unique_ptr<metrics::HistoryWriter> history_;

  std::mutex mu_;
  std::condition_variable changed_;  // any epoch, barrier or store change
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  // Not OK once the scheduler refuses its state (HearWitness).
  absl::Status refusal_ ABSL_GUARDED_BY(mu_);
  // --accept-data-loss: the highest lost number a witness brought (logged once each).
  uint64_t accepted_seq_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void()> on_refusal_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Job, std::less<>> jobs_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, NodeRef> nodes_ ABSL_GUARDED_BY(mu_);
  // Node ids whose slot a replacement took, with who took it: such a node is told it was
  // replaced (FAILED_PRECONDITION), not that it is unknown. Dropped with the job; not persisted
  // (after a scheduler restart a replaced id is NOT_FOUND).
  std::map<uint64_t, NodeRef> replaced_ ABSL_GUARDED_BY(mu_);
  // Bytes (keys and values) of every job's bootstrap store together.
  size_t store_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_node_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::thread detector_;
};

// Names used in messages: "worker 'w3' (rank 3)", "server 's0' (shard 0)".
std::string DescribeMember(herd::v1::Role role, const herd::v1::Member& m);
std::string_view JobStateName(herd::v1::JobState state);
// COMPLETED, FAILED and CANCELLED: nothing runs any more, every process exits.
bool IsTerminal(herd::v1::JobState state);

}  // namespace herd::scheduler
