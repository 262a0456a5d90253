#pragma once
// The scheduler's logic, without gRPC: jobs, membership, failure detection, epochs, plans,
// barriers and the bootstrap store of each job, persisted in a StateDb. The gRPC service
// (service.h) is a thin edge over this class; the unit tests drive it directly.
//
// Threading: every public method may be called from any thread. One mutex guards the state;
// no call holds it for work that grows with the job's size except an epoch's change. The waits
// (Barrier, StoreGet) come in two forms: blocking ones (a condition variable with a deadline,
// for the unit tests and in-process callers) and asynchronous ones that register a callback and
// return (the gRPC edge uses those, so a waiting process holds no server thread). A background
// thread declares nodes dead when their heartbeats stop; a ticker grants horizons, expires waits
// and folds progress (follow.cc).
//
// Following a job (follow.cc, docs/scheduler.md "Following a job"): each process keeps one
// Follow stream. Up come heartbeats and batched progress; down go the epoch's view (what every
// plan is computed from), the horizon (plans hold up to it) and the job's end. Changes of plan
// are placed after every horizon granted, so processes compute each iteration's plan
// themselves and their iterations wait on no call.
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
#include <deque>
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
#include "scheduler/client/job_states.h"
#include "scheduler/horizon.h"
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
  // How far ahead of the job's progress the horizon runs (docs/scheduler.md, "Horizon"): about
  // this much work at the job's measured iteration rate, and at least min_horizon iterations.
  std::chrono::milliseconds horizon_ahead{1000};
  int64_t min_horizon = 4;
  // How often a following process sends a message when it has nothing to ask (its heartbeat,
  // with its progress): a third of the heartbeat timeout unless set.
  std::chrono::milliseconds follow_interval{0};
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
  // The job without its members, progress, results and events (GetJobRequest.brief).
  absl::StatusOr<herd::v1::JobStatus> GetJobBrief(std::string_view name);
  // `status` without what grows with the job's size (what a worker needs of an answer).
  static herd::v1::JobStatus Brief(const herd::v1::JobStatus& status);
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

  // The asynchronous forms of the waits: `done` runs exactly once, with the answer, either
  // before the call returns or later on another thread (never under the core's lock).
  using StoreDone = std::function<void(absl::StatusOr<std::string>)>;
  void StoreGetAsync(std::string_view job, std::string_view key, Deadline deadline, StoreDone done);
  using BarrierDone = std::function<void(absl::StatusOr<herd::v1::BarrierResponse>)>;
  void BarrierAsync(const herd::v1::BarrierRequest& req, Deadline deadline, BarrierDone done);
  using StoreManyDone = std::function<void(absl::StatusOr<herd::v1::StoreGetManyResponse>)>;
  void StoreGetManyAsync(const herd::v1::StoreGetManyRequest& req, Deadline deadline,
                         StoreManyDone done);

  // ---- Following a job (follow.cc) ----
  // Where the core sends one stream's events (the gRPC edge queues them for its writer). Send
  // must not block and must not call back into the core.
  class FollowSink {
   public:
    virtual ~FollowSink() = default;
    virtual void Send(const herd::v1::FollowEvent& event) = 0;
    // Ends the stream with `why` (the scheduler shuts down).
    virtual void Close(const absl::Status& why) = 0;
  };
  // A stream's first message: the node must be a live member of the job (as for a heartbeat),
  // or a node of a job that ended (it then hears the ending at once). Sends the first event
  // (the view, the horizon) and returns the stream's id.
  absl::StatusOr<uint64_t> OpenFollow(const herd::v1::FollowRequest& first,
                                      std::shared_ptr<FollowSink> sink);
  // Every later message of stream `id`: a heartbeat with the process's progress and asks.
  // An error ends the stream (the edge finishes it with that status).
  absl::Status TakeFollow(uint64_t id, const herd::v1::FollowRequest& msg);
  void CloseFollow(uint64_t id);
  // One pass of the ticker: grants horizons, expires waits, folds progress into the jobs.
  void Tick();
  // Open Follow streams (a gauge).
  size_t FollowStreams();

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
  // A wait registered by StoreGetAsync or BarrierAsync, answered once.
  struct StoreWaiter {
    Deadline deadline = Deadline::Infinite();
    StoreDone done;
  };
  // A StoreGetMany that waits: filed under the first key it still misses, moved to the next
  // one when that key is set.
  struct ManyWaiter {
    herd::v1::StoreGetManyRequest req;
    size_t found = 0;  // req.keys[0, found) were set at the last look
    size_t bytes = 0;  // their values
    Deadline deadline = Deadline::Infinite();
    StoreManyDone done;
  };
  struct BarrierWaiter {
    std::string key;  // "worker/<name>" or "server/<name>"
    std::string name;
    uint64_t node_id = 0;
    uint64_t generation = 0;  // of the barrier when it arrived
    uint64_t epoch = 0;
    herd::v1::Role role = herd::v1::ROLE_UNSPECIFIED;
    std::string who;
    Deadline deadline = Deadline::Infinite();
    BarrierDone done;
  };
  // One Follow stream of a process of the job (follow.cc).
  struct Follower {
    uint64_t node_id = 0;
    herd::v1::Role role = herd::v1::ROLE_UNSPECIFIED;
    int slot = 0;
    std::shared_ptr<FollowSink> sink;
    uint64_t view_revision = 0;  // of the view it was sent last
    int64_t horizon_sent = -1;
    int64_t want_completed = -1;  // tell it once completed_iteration reaches this
    uint64_t answered_notice = 0;
  };
  // A worker fell silent in an elastic job whose survivors roll back: before it is declared
  // dead, the live workers are asked where they are (FollowEvent.notice), so the new epoch
  // begins at the first iteration one of them has not completed (follow.cc).
  struct Gathering {
    uint64_t notice = 0;  // 0: none going on
    Clock::time_point deadline;
  };
  struct Job {
    herd::v1::JobStatus status;
    std::vector<Clock::time_point> worker_seen, server_seen;  // last heartbeat, by slot
    std::map<std::string, BarrierState> barriers;             // by name (current epoch)
    std::map<std::string, std::string> kv;                    // bootstrap store
    bool committing = false;  // a checkpoint's files are being committed (outside the lock)
    size_t kv_bytes = 0;      // its keys and values
    // Asynchronous waits.
    std::multimap<std::string, StoreWaiter> store_waiters;                 // by key
    std::multimap<std::string, std::unique_ptr<ManyWaiter>> many_waiters;  // by missing key
    std::vector<BarrierWaiter> barrier_waiters;
    // Following (follow.cc): the streams by id, the view they were sent, the horizon's rate.
    std::map<uint64_t, Follower> followers;
    uint64_t view_revision = 0;
    std::string view_bytes;  // the serialized view of view_revision
    RateEstimate rate;
    int64_t asked_horizon = -1;     // the highest iteration a worker asked to begin
    bool progress_changed = false;  // reports not folded into completed_iteration yet
    bool progress_unsaved = false;  // reports not written to the state yet
    Clock::time_point progress_saved_at;
    Gathering gathering;
    uint64_t notices = 0;  // notices sent so far
    // The epoch before the current one: a change placed after the horizon begins in the future,
    // and the iterations before it are still the previous epoch's (GetPlan serves them).
    std::optional<herd::v1::EpochView> previous_view;
  };

  explicit SchedulerCore(SchedulerOptions options);
  absl::Status Load();

  // Registration (registration.cc): a group commit. RegisterNode queues in registrations_;
  // the first in line places every queued registration of its job on one copy of its state
  // (PlaceRegistration, in order, each as if alone), writes it once and answers each
  // (FinishRegistration). RegisterGroup answers the group in its order.
  struct QueuedRegistration;
  struct Placement;
  std::vector<absl::StatusOr<herd::v1::RegisterNodeResponse>> RegisterGroup(
      const std::vector<QueuedRegistration*>& group) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status PlaceRegistration(Job& job, herd::v1::JobStatus& next,
                                 const herd::v1::RegisterNodeRequest& req, Placement* placement)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  herd::v1::RegisterNodeResponse FinishRegistration(Job& job,
                                                    const herd::v1::RegisterNodeRequest& req,
                                                    const Placement& placement)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
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

  // Where a new epoch begins. kAfterProgress: after the last iteration every live worker
  // completed (a death: the survivors of the collective modes run the iterations after it
  // again; an ending). kAfterHorizon: after every iteration a worker may have begun (the
  // horizon granted), so no live worker runs anything again (a worker joining: the survivors
  // hand it their state at that boundary).
  enum class EpochStart { kAfterProgress, kAfterHorizon };
  // Starts a new epoch on `next` (a copy of a job's status): moves a PENDING job whose
  // processes are all there (and whose layout is known) to RUNNING, recomputes the completed
  // iteration and sets the epoch's first iteration as `start` says (never before the current
  // epoch's first iteration unless a death moved it back).
  static void AdvanceEpoch(herd::v1::JobStatus& next, std::string reason,
                           EpochStart start = EpochStart::kAfterProgress);
  // Ends the job in `next` with a terminal state and a new epoch (the caller commits it).
  static void EndJob(herd::v1::JobStatus& next, herd::v1::JobState state, std::string reason);
  // When no worker of `next` is still training (each finished or, in a mode that goes on
  // without it, died) and at least one finished: sets the job's result (rank 0's, or the first
  // finished worker's), ends it COMPLETED and returns true. The last finish does it, and so
  // does the death of the last worker still training after the others finished.
  static bool CompleteIfDone(herd::v1::JobStatus& next);
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

  // Asynchronous waits (sync.cc). `done` runs on the completer thread, outside the lock.
  void Complete(std::function<void()> done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CompleterLoop();
  // Answers every wait of `job` that its new state settles: barriers of an epoch that ended
  // (ABORTED) or of a job that ended, store reads of a job that ended.
  void SettleWaits(Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExpireWaits(Clock::time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A StoreGetMany's answer once every key is set, or `expired`; nullopt while it waits.
  std::optional<absl::StatusOr<herd::v1::StoreGetManyResponse>> GetManyAnswer(const Job& job,
                                                                              ManyWaiter& w,
                                                                              bool expired)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WakeManyWaiters(Job& job, const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Following (follow.cc).
  // After a commit: sends the job's view to its streams when it changed (not while the job is
  // PENDING: its processes wait for it to start, and registrations would otherwise send
  // every stream one event each), and answers the waits the change settles.
  void Publish(Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The event a stream gets now: the view when `with_view`, the horizon, completion, sequence.
  herd::v1::FollowEvent EventFor(const Job& job, bool with_view) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A stream's message, after its stream and job were checked.
  absl::Status TakeFollowLocked(Job& job, uint64_t id, const herd::v1::FollowRequest& msg)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A worker's report on a stream (or a legacy ReportIteration): its progress, in memory.
  absl::Status TakeProgress(
      Job& job, int slot, int64_t completed,
      const google::protobuf::RepeatedPtrField<herd::v1::IterationReport>& its)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Folds reports into completed_iteration, answers want_completed, saves progress now and then.
  void FoldProgress(Job& job, Clock::time_point now, bool save) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the horizon when it is due (a worker asked, or the job runs close to it), starting
  // the policy's checkpoints it crosses; sends it to the workers' streams.
  void GrantHorizon(Job& job, Clock::time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The failure detector's work on one job at `now`.
  void SweepJob(Job& job, Clock::time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether every live worker with a stream answered the gathering's notice.
  bool GatheringAnswered(const Job& job) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TickerLoop();

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
  // Registrations in line (registration.cc); the first leads the next group. Its own mutex,
  // never held while taking mu_: processes join the line while a group is written under mu_.
  std::mutex registrations_mu_;
  std::deque<QueuedRegistration*> registrations_ ABSL_GUARDED_BY(registrations_mu_);
  // Follow streams: id -> (job, node).
  struct StreamRef {
    std::string job;
    uint64_t node_id = 0;
  };
  std::map<uint64_t, StreamRef> streams_ ABSL_GUARDED_BY(mu_);
  uint64_t next_stream_id_ ABSL_GUARDED_BY(mu_) = 1;
  // Answers of asynchronous waits, run by the completer thread outside the lock.
  std::deque<std::function<void()>> completions_ ABSL_GUARDED_BY(mu_);
  std::condition_variable completions_cv_;
  bool completer_stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread detector_;
  std::thread ticker_;
  std::thread completer_;
};

// Names used in messages: "worker 'w3' (rank 3)", "server 's0' (shard 0)".
std::string DescribeMember(herd::v1::Role role, const herd::v1::Member& m);

}  // namespace herd::scheduler
