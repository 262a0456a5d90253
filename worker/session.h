#pragma once
// The worker session: herd's C++ training API. A training program (the built-in `herd worker`,
// the Python front end, any libtorch program) joins a job through it and drives its own
// forward and backward; the session follows the scheduler's plan and runs the job's mode:
//
//   auto session = Session::Open(options);               // waits for the job, reads its spec
//   ... build the model, read the data ...
//   session->Register();                                 // a worker of the job from now on
//   (Session::Join(options) is Open and Register at once)
//   session->Attach(tensors, layout, planned_iterations);  // declares the model, waits to run
//   for (int64_t i = 0; i < n; ++i) {
//     Executor* ex = *session->BeginIteration(i);         // plan of i; a new mode switches here
//     ... forward (ex->BeforeForward(t) before tensor t's layer), backward
//         (ex->GradientReady(t, grad) as each gradient appears), ex->EndBackward() ...
//     session->EndIteration(stats);                       // reports the iteration
//   }
//   session->Flush();                                     // parameters hold every update
//   session->Finish(result);                              // the job completes when all have
//
// Mode switches: every worker switches at the same iteration, because the scheduler only
// accepts a switch from an iteration no worker has begun and the mode of an iteration is a
// pure function of the job's schedule. At a new mode (or new mode parameters) the session
// flushes the old executor and exports its state (optimizer slots, residuals, replicas),
// builds the communicator of the new stretch (transport::Connect, keyed by the stretch's first
// iteration so the ranks of a stretch find each other through the scheduler's store) and the
// new executor, which imports that state: momentum and residuals survive the switch, by the
// rules of docs/checkpoint.md.
//
// Ending: when the job ends (cancelled, or failed because of another process), the heartbeat
// hears it within an interval and aborts the communicator, so a rank blocked in a collective
// returns at once; BeginIteration and the executor's calls then return the job's outcome
// (CANCELLED or ABORTED naming the process that failed). A worker whose own error ends its
// training calls Fail(), which fails the job for every other process.
//
// Threading: one thread drives the session; the heartbeat thread only aborts.
//
// The parts with one job each: PlanFollower (plan_follower.h: the epoch view and horizon over
// the Follow stream, each iteration's plan computed here), CheckpointParticipant
// (checkpointing/checkpoint_participant.h: staging, reporting, the program's values, the
// resumed checkpoint), RollbackLog (rollback_log.h: an elastic worker's commits), and the
// stretch's layout and communicator (stretch.h). What stays in the session is what ties them to
// the executor: switching modes at a stretch's boundary (SwitchTo: the old executor's state
// carried into the new one, the state handed to a joiner), the checkpoint cut and the elastic
// recovery.

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "common/defaults.h"
#include "common/timeline.h"
#include "herd/v1/scheduler.pb.h"
#include "scheduler/client/scheduler_client.h"
#include "transport/connect.h"
#include "transport/store/store.h"
#include "worker/checkpointing/checkpoint_participant.h"
#include "worker/elastic_plan.h"
#include "worker/executor.h"
#include "worker/plan_follower.h"
#include "worker/rollback_log.h"
#include "worker/trainable.h"

namespace herd::worker {

struct SessionOptions {
  scheduler::ClientOptions scheduler;
  std::string job;
  std::string name;                // stable identity with the scheduler (default: HOST-PID)
  std::string host = "127.0.0.1";  // where peers reach this process (informational today)
  std::optional<int> rank;         // requested rank (default: the lowest free one)
  transport::Backend transport = transport::Backend::kUcx;
  std::chrono::milliseconds timeout{defaults::kOperationTimeout};    // every collective wait
  std::chrono::milliseconds start_timeout{defaults::kStartTimeout};  // the others to register
  std::chrono::milliseconds wait_for_job{defaults::kWaitForJob};     // the job to be submitted
  FusionSettings fusion;
  std::string timeline_dir;  // write <dir>/worker-<rank>.json (Chrome trace) when set
  // Serve this process's Prometheus metrics at http://HOST:PORT/metrics (docs/metrics.md) from
  // Join on, until the process exits; "" (the default): none served (they are still counted).
  std::string metrics_listen;
  // Preemption: once this flag is set (a SIGTERM handler), the session asks the scheduler for a
  // last checkpoint and stops at it (preempted()); when the job has not stopped within
  // `preempt_grace`, training fails instead.
  const std::atomic<bool>* stop_requested = nullptr;
  // Set by the session while SIGTERM can be a preemption (registered in a job that has a
  // checkpoint directory, not finished); the handler lets SIGTERM kill the process otherwise.
  std::atomic<bool>* preemptible = nullptr;
  std::chrono::milliseconds preempt_grace{defaults::kPreemptionGrace};
  // The parameter-server shards: TLS, with these PEM roots (empty: the system's). The token is
  // the scheduler's (one secret per cluster).
  bool server_tls = false;
  std::string server_tls_ca_file;
};

class Session {
 public:
  // Waits for the job to exist (options.wait_for_job), registers as one of its workers and
  // starts heartbeating. A job that has ended answers with its outcome (OK for COMPLETED).
  // The same as Open, then Register.
  static absl::StatusOr<std::unique_ptr<Session>> Join(SessionOptions options);
  // Join in two steps, for a program with a slow start-up (building its model, reading its
  // data): Open waits for the job and reads its spec (spec(), world_size()) without
  // registering; the program gets ready; Register makes it a worker of the job. A worker that
  // registers into a running elastic job is waited for by the live workers at the next epoch's
  // boundary until it attached, so what it does between Register and Attach is time they lose:
  // the built-in worker builds its model and reads its data before Register
  // (docs/elastic.md, "Rejoin"). Until Register, rank() is -1 and nothing else may be called.
  static absl::StatusOr<std::unique_ptr<Session>> Open(SessionOptions options);
  // Registers as one of the job's workers (re-reading the job: it may have moved on since
  // Open), opens the checkpoint a resumed job starts from and starts heartbeating. A restarted
  // process taking its slot back by name waits (options.start_timeout) until the scheduler
  // declared its predecessor dead. FAILED_PRECONDITION when registered already.
  absl::Status Register();
  bool registered() const { return is_registered_; }
  // The identity with the scheduler (options.name, or HOST-PID when it was empty).
  const std::string& name() const { return options_.name; }
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return spec_.workers(); }
  const std::string& job() const { return options_.job; }
  // The job's spec (after Attach: with the model's layout).
  const herd::v1::JobSpec& spec() const { return spec_; }
  Timeline& timeline() { return *timeline_; }
  // The job's key-value store at the scheduler (keys written once per job): how the ranks meet
  // outside any communicator, e.g. the Python front end's small all-reduces of user metrics.
  transport::Store& store() { return *store_; }
  uint64_t node_id() const { return registered_.node_id(); }

  // Binds the model: `tensors` in forward order (fp32, host memory that stays put for the
  // session's lifetime), their `layout` as a JobSpec lists it, and the iterations this worker
  // will run (0: unknown). The scheduler checks the layout against the job's (or takes it as
  // the job's when the spec listed none) and FAILED_PRECONDITION names the first tensor that
  // differs. Then waits until every process of the job is there.
  absl::Status Attach(std::vector<ModelTensor> tensors, std::vector<herd::v1::TensorSpec> layout,
                      int64_t planned_iterations);

  // Starts `iteration`: fetches its plan, switches mode when the plan says so, and returns the
  // executor to drive it through (valid until the next BeginIteration or Flush).
  absl::StatusOr<Executor*> BeginIteration(int64_t iteration);
  // Ends the iteration begun last and reports it to the scheduler.
  absl::Status EndIteration(const StepStats& step);
  // Waits for every update in flight (dear's deferred all-gathers), so the parameters are
  // final: before evaluation, a checkpoint or the end. In an elastic job of a collective mode
  // it also waits until every live worker completed the iteration ended last
  // (AwaitLiveWorkersAt): UNAVAILABLE, for Recover, when the membership changes meanwhile.
  absl::Status Flush();
  // Reports this worker's finished training (after Flush). The job completes when every
  // worker has finished; the answer is the job's status as of this call. In a job with a
  // checkpoint directory the final checkpoint commits first (TakeFinalCheckpoint); a program
  // that attached with 0 planned iterations declares its end here (DeclareEnd).
  absl::StatusOr<herd::v1::JobStatus> Finish(herd::v1::TrainingResult result);
  // The optimizer the workers apply locally (the collective modes, ps_ec, the decentralized
  // modes) instead of the job's: a training program that owns its optimizer (the Python front
  // end translates torch's) sets it before the first iteration. Executors built from then on
  // use it; its learning_rate_source, when set, is read at every step. The shards of ps_sync
  // and ps_async keep applying the job's optimizer (see OptimizerOnShards).
  void SetOptimizer(optim::OptimizerConfig config) { optimizer_override_ = std::move(config); }
  // The optimizer the job's spec names, as the executors and shards would apply it.
  absl::StatusOr<optim::OptimizerConfig> JobOptimizer() const;
  // Whether `mode` applies the update on the shards (ps_sync, ps_async) rather than here.
  static bool OptimizerOnShards(std::string_view mode);

  // Fails the job because of this worker: the other processes stop with `why`. Does nothing
  // when the job had already ended (it was the job's ending that stopped this worker).
  void Fail(const absl::Status& why);

  // ---- Checkpoints and resume (session_checkpoint.cc; docs/checkpoint.md) ----
  // At the cut a plan names (the first iteration no worker had begun), BeginIteration first
  // flushes the executor, copies the parameters ("param/<tensor>"), the executor's state, the
  // iteration and the data position into a staging copy, hands it to a background writer and
  // trains on; the writer reports the file to the scheduler, which commits the checkpoint.
  // A resumed job: Attach imports the checkpoint's parameters (its layout must be the model's:
  // FAILED_PRECONDITION names the first tensor that differs) and the first executor imports
  // its state; the program starts at start_iteration() and start_position().
  //
  // Where the program is in its data, saved with each checkpoint: set before every
  // BeginIteration (a program that never sets it resumes by iteration alone), and in an
  // elastic job before the Flush at the end of a stretch (the position after it: where a
  // Recover that finds nothing to run again goes on).
  void SetDataPosition(const DataPosition& at) { position_ = at; }
  // The program's own values saved with each checkpoint (a front end's `herd.state(...)`): the
  // values as last set before the checkpoint's iteration began. INVALID_ARGUMENT (nothing
  // changed) past the bounds: 64 keys, keys of 1-64 characters, 64 KiB per value.
  absl::Status SetProgramValue(const std::string& key, std::string value) {
    return checkpoints_.SetProgramValue(key, std::move(value));
  }
  // A resumed job's program values (those its checkpoint saved); empty otherwise.
  const std::map<std::string, std::string>& resumed_program_values() const {
    return checkpoints_.resumed_program_values();
  }
  // After Attach: the job's first iteration and data position (a resumed job's are its
  // checkpoint's; 0 and the start of the data otherwise; for a worker that joined a running
  // elastic job, where the live workers go on with it). Before Attach, the job's own start.
  int64_t start_iteration() const { return start_iteration_; }
  const DataPosition& start_position() const { return start_position_; }
  // The iteration start_position() is the data position of: start_iteration(), except for a
  // worker that joined a running elastic `ps_async` job. No live worker hands it a state there
  // (the model is the shards', its first pull brings it), so its position is the job's start
  // and the program advances it by one global batch per iteration up to start_iteration()
  // (worker/data/epoch_order.h Advance; the Python front end's ElasticSampler does it).
  int64_t start_position_iteration() const {
    return start_position_iteration_.value_or(start_iteration_);
  }
  // The job stopped at a checkpoint because a process was preempted (SIGTERM): BeginIteration
  // returned CANCELLED after the checkpoint committed; the program exits 0 without Finish.
  bool preempted() const { return preempted_; }
  // Waits until every checkpoint file this worker staged is written and reported.
  absl::Status DrainCheckpoints(Deadline deadline) { return checkpoints_.Drain(deadline); }
  // The digest of this worker's parameters now (worker/checkpointing/params_digest.h).
  std::string ParamsDigest() const;

  // ---- Elastic membership (session_elastic.cc; docs/elastic.md) ----
  // In a job with an `elastic` block, every iteration that ends (EndIteration) is committed in
  // memory first: the parameters and the executor's state, by the export checkpoints use. When
  // a worker dies, the survivors roll back to the commit before the new epoch's first
  // iteration and run on with the live workers. When a worker joins (a restarted one, or a
  // replacement), they do the same and the new communicator's first act hands the joiner the
  // state of a live worker; the joiner's Attach takes it, and start_iteration() and
  // start_position() then say where it begins (the loop's `first` and data position):
  //
  //   for (it = first; it < total; ++it) {
  //     auto ex = session->BeginIteration(it);
  //     absl::Status st = ex.ok() ? <step through *ex> : ex.status();
  //     if (!st.ok()) {
  //       auto back = session->Recover(st);         // the error itself when it is not that
  //       if (!back.ok()) return back.status();
  //       it = back->iteration - 1; at = back->position; continue;
  //     }
  //     session->EndIteration(stats);
  //   }
  struct Rollback {
    int64_t iteration = 0;  // run this iteration again (and the ones after it)
    DataPosition position;  // its data position
  };
  // Call with an error of BeginIteration or of the iteration's executor calls. In an elastic
  // job whose live workers changed, waits for the new epoch (at most the heartbeat timeout plus
  // a few seconds; while the job is paused below min_workers, until the scheduler resumes or
  // fails it), restores the commit before the epoch's first iteration and returns where to go
  // on; the next BeginIteration builds the executor for the live workers. Otherwise (not
  // elastic, the job ended, the membership did not change, no such commit) returns
  // Diagnose(error).
  absl::StatusOr<Rollback> Recover(const absl::Status& error);
  // This worker's part of the global batch (batch_size x the job's workers) of the iteration
  // begun last: B samples at rank x B, or after a shrink an even share among the live workers.
  BatchSlice DataSlice(int batch_size) const;
  // The ranks the scheduler holds alive now (every rank of a job that lost none): whose values
  // a program's own exchanges through store() can still wait for.
  absl::StatusOr<std::vector<int>> LiveRanks() const;
  // Whether this worker evaluates the final model (its result is the job's): rank 0, or the
  // lowest live rank once rank 0 is gone.
  bool evaluates() const { return member_index_ == 0; }

  // The mode of the iteration begun last ("" before the first).
  std::string mode() const { return executor_ ? std::string(executor_->mode()) : ""; }
  // Seconds this worker was blocked on communication, over the whole session.
  double exposed_comm_seconds() const { return exposed_seconds_; }
  // What the last executor settled on (e.g. the tuned fusion threshold).
  std::string executor_description() const { return executor_description_; }
  // Why the job ended, once the session saw it end (OK while it runs, and after COMPLETED).
  absl::Status job_outcome() const;
  // The status to report for an error `st` of this worker: the job's outcome when the job
  // ended (another process failed first: a transport error here is its consequence, so the
  // scheduler is asked, briefly, whether the job failed), `st` otherwise.
  absl::Status Diagnose(absl::Status st);

 private:
  Session(SessionOptions options, std::shared_ptr<scheduler::SchedulerClient> client);
  // Waits for the job to exist and not to have ended; takes its spec.
  absl::StatusOr<herd::v1::JobStatus> AwaitJob();
  absl::Status WaitRunning();
  // The plan of `iteration`, computed from the view that governs it (PlanFollower): no call to
  // the scheduler unless this worker caught up with its horizon (options.timeout).
  absl::StatusOr<herd::v1::Plan> FetchPlan(int64_t iteration);
  // The plan of `iteration` as the scheduler answers it (GetPlan): for the plan after the last
  // iteration, whose cut the scheduler makes the final checkpoint. A restarting scheduler
  // (UNAVAILABLE) is waited for.
  absl::StatusOr<herd::v1::Plan> AskPlan(int64_t iteration);
  absl::Status SwitchTo(const herd::v1::Plan& plan, int64_t iteration);
  // Checkpoints (session_checkpoint.cc).
  // Saves checkpoint plan.checkpoint_id() at iteration plan.iteration(), the cut.
  absl::Status TakeCheckpoint(const herd::v1::Plan& plan);
  // A preempted job: waits for the job to end after this worker's part of its last checkpoint.
  absl::Status StopAtCheckpoint(const herd::v1::Plan& plan);
  // A job with a checkpoint directory ends with its final state saved: after its last
  // iteration every worker asks for the plan of the iteration after it, whose cut the
  // scheduler makes a checkpoint ("final"), and waits for the commit before finishing.
  absl::Status TakeFinalCheckpoint();
  // A program that did not know its iteration count at Attach (the Python front end: a script's
  // loop) declares it when it finishes: the iterations it ended, so the final checkpoint's cut
  // is the iteration after its last, as a planned count would have made it. Skipped (no final
  // checkpoint) when the job has no checkpoint directory, no iteration ran in this session or
  // the last one begun was not ended. A worker that ran another count than the one declared
  // first is refused (FAILED_PRECONDITION naming both).
  absl::Status DeclareEnd();
  // A resumed job: opens the checkpoint it names and starts at its iteration and data position
  // (Register).
  absl::Status OpenResume(const herd::v1::JobStatus& job);
  // Asks once for the preemption checkpoint when the stop flag is set (driver or heartbeat).
  void MaybeRequestPreemption();

  // Elastic membership (session_elastic.cc).
  // Keeps the state after `iteration` (parameters and executor state) in memory; the two newest
  // commits are kept (a survivor may be one iteration ahead of the slowest).
  // `flush`: Flush the executor first (false only where its StateLag says the state is that
  // of `iteration` already). A commit of the iteration the newest one holds is not taken again.
  absl::Status CommitIteration(int64_t iteration, bool flush = true);
  // Sends the report of an iteration to the scheduler (progress is informational: a failure is
  // logged, not returned).
  void SendReport(const herd::v1::ReportIterationRequest& report);
  // dear (StateLag 1): the report of the iteration ended last waits until that iteration is
  // committed: at the next EndIteration, or here (Flush first), before a mode switch, the end,
  // or anything that reads the parameters as final.
  absl::Status SettleLaggedReport();
  // The end of a stretch of iterations (the job's last one, a Python pass over the data, an
  // evaluation) in an elastic job whose workers exchange through a communicator: a peer that
  // dies before it completed `iteration` leaves the others that iteration to run again, which
  // this worker must still be there to join, so it waits until the scheduler says every live
  // worker completed it. UNAVAILABLE (for Recover) when the membership changed first;
  // DEADLINE_EXCEEDED past the operation timeout plus the heartbeat timeout. Immediate for an
  // iteration confirmed already, and outside elastic collective jobs (the shards' modes run
  // nothing again).
  absl::Status AwaitLiveWorkersAt(int64_t iteration);
  // Follower thread, at each view: aborts the communicator when a member of the current stretch
  // died, so a rank blocked in a collective returns at once and can Recover. A worker joining
  // changes nothing here: its epoch begins after the horizon, where every worker leaves the
  // stretch at its iteration boundary (BeginIteration).
  void WatchMembership(const herd::v1::EpochView& view);
  // Whether the plan's live workers differ from those of the current stretch.
  bool MembershipChanged(const herd::v1::Plan& plan) const;
  // ps_sync and ps_ec after a death: the shards completed the interrupted round without the
  // dead worker, nothing is rerun; this worker takes its position among the live workers of
  // `plan` (the data split follows) and keeps its executor. ps_sync and ps_ec after a return:
  // the source among the live workers hands each joiner its state first (HandOverOnShards).
  absl::Status FollowShrinkOnShards(const herd::v1::Plan& plan, int64_t iteration);
  // On the new communicator of a stretch after a membership change: the members say whether
  // they join; each joiner receives the state before `iteration` from its source (the nearest
  // live member before it), imports the parameters and gets the executor's state in `carried`
  // (its own error-feedback state starts at zero). Nothing is sent when no member joins.
  absl::Status HandOverState(transport::Communicator& comm, int64_t iteration,
                             std::optional<checkpoint::ProcessState>& carried);
  // The state a joiner takes, before `iteration`: the parameters, the non-parameter part of
  // `executor_state` (may be null), the data position before `iteration`, the program values,
  // the iteration and this worker's rank (state_handover.h's encoding).
  std::string EncodeHandover(int64_t iteration,
                             const checkpoint::ProcessState* executor_state) const;
  struct HandedState {
    int64_t iteration = 0;  // the joiner starts here
    int source = -1;        // the job rank that sent it
    int64_t own_bytes = 0;  // the source's own error-feedback state, not taken
  };
  // The joiner's side of EncodeHandover: decodes `bytes` (from `from`, for messages), checks
  // the iteration when `iteration` is set, imports the parameters into the model, keeps the
  // executor's part in `carried` (as process `process`; its own error-feedback state dropped),
  // and sets the start iteration, data position and program values there.
  absl::StatusOr<HandedState> TakeHandedState(std::string_view bytes,
                                              std::optional<int64_t> iteration,
                                              std::string_view from, int process,
                                              std::optional<checkpoint::ProcessState>& carried);
  // The most bytes of handed-over state this model can hold (a damaged size is refused).
  int64_t HandoverBound() const;
  // ps_sync and ps_ec (session_shards_elastic.cc). The source's side: hands the state before
  // `iteration` to each of `joiners` over a communicator of two, then has the executor
  // announce them with this iteration's pushes. Returns the joiners it could not serve because the
  // membership moved on meanwhile (the next plan says who is live); another failure is an error.
  absl::StatusOr<std::vector<int>> HandOverOnShards(const herd::v1::Plan& plan, int64_t iteration,
                                                    const std::vector<int>& joiners);
  // The joiner's side, in JoinRunningJob: receives its source's state (as `plan`'s generation
  // names the communicator), imports the parameters, keeps the executor's state for the
  // executor the first BeginIteration builds, and starts at the source's boundary.
  absl::Status JoinOnShards(const herd::v1::Plan& plan);
  // Rank `comm_rank` (0 the source, 1 the joiner) of the handover communicator of `joiner` at
  // membership `generation`; the bootstrap gives up once the job's membership moved past it.
  absl::StatusOr<std::unique_ptr<transport::Communicator>> ConnectForHandover(int32_t generation,
                                                                              int joiner,
                                                                              int comm_rank);
  // The plan's live ranks and the node id of the process holding each (plan.workers).
  static std::map<int, uint64_t> ShardLiveNodes(const herd::v1::Plan& plan);
  // How long either side of a ps_sync/ps_ec handover waits: the operation timeout plus the
  // heartbeat timeout (the source reaches its boundary within an iteration of the new generation).
  std::chrono::milliseconds ShardHandoverTimeout() const;
  // Attach of a worker that registered into a running elastic job: waits out a pause, builds
  // the stretch of the epoch it joins (receiving the state from the live workers) and sets the
  // start iteration and data position there. Retried when the membership changes meanwhile.
  absl::Status JoinRunningJob();

  // Records that the job ended and aborts the communicator (heartbeat thread or driver).
  void NoteJobEnded(herd::v1::JobState state, const std::string& reason);
  // The status to return instead of `st` when the job's ending caused it.
  absl::Status Explain(absl::Status st) const;

  const SessionOptions options_;
  std::shared_ptr<scheduler::SchedulerClient> client_;
  // Cancelled with the job's outcome when the job ends: wakes calls blocked on the shards.
  std::shared_ptr<CancelToken> ps_cancel_ = std::make_shared<CancelToken>();
  std::shared_ptr<transport::Store> store_;
  herd::v1::JobSpec spec_;
  herd::v1::RegisterNodeResponse registered_;
  int rank_ = -1;  // until Register
  bool is_registered_ = false;
  std::unique_ptr<Timeline> timeline_ = std::make_unique<Timeline>();  // disabled until Register
  // The job's plan and the heartbeats, over one Follow stream (from Register on).
  std::unique_ptr<PlanFollower> follower_;

  std::vector<ModelTensor> tensors_;
  std::optional<optim::OptimizerConfig> optimizer_override_;
  std::unique_ptr<Executor> executor_;
  std::string executor_key_;  // the serialized ModeSpec the executor runs
  std::string executor_description_;
  double exposed_seconds_ = 0;
  int64_t iteration_ = -1;
  std::chrono::steady_clock::time_point iteration_begin_;
  bool finished_ = false;

  // Checkpoints: the writer, the checkpoint a resumed job starts from, the program's values.
  CheckpointParticipant checkpoints_{client_, options_.job, options_.timeout};
  DataPosition position_;
  int64_t start_iteration_ = 0;
  int64_t planned_iterations_ = 0;            // as declared by Attach or DeclareEnd (0: not known)
  std::vector<herd::v1::TensorSpec> layout_;  // as declared by Attach (DeclareEnd repeats it)
  int64_t last_ended_ = -1;
  int64_t confirmed_by_all_ = -1;  // the highest iteration AwaitLiveWorkersAt saw completed // the
                                   // iteration EndIteration ended last
  DataPosition start_position_;
  std::optional<int64_t> start_position_iteration_;  // set by a ps_async join (see its accessor)
  bool preempted_ = false;
  std::atomic<bool> preemption_asked_{false};
  std::chrono::steady_clock::time_point preempt_deadline_;

  // Elastic membership.
  bool elastic_ = false;  // the job's spec has an `elastic` block
  bool joining_ = false;  // registered into the running job; holds no state of it yet
  RollbackLog rollback_;  // the two newest commits, the data positions of the newest begun
  // dear in an elastic job: the report of the iteration ended last, sent once it is committed
  // (a report reaches the scheduler only after its commit: the epoch after a death begins
  // after the last iteration every live worker reported).
  std::optional<herd::v1::ReportIterationRequest> lagged_report_;
  // A rollback's executor state, for the executor the next BeginIteration builds.
  std::optional<checkpoint::ProcessState> restored_;
  // The shards' modes in an elastic job: the live ranks of the plan this worker followed last,
  // each with the node id of the process that held it (a later plan's rank held by another
  // process, or not followed, is a worker back in its slot: ps_sync and ps_ec hand it their
  // state, FollowShrinkOnShards).
  std::map<int, uint64_t> shard_live_nodes_;
  int member_index_ = 0;   // this worker's position among the live workers of the stretch
  int members_count_ = 0;  // live workers of the stretch (0: the job's, before the first)
  // The membership generation the stretch was built for (written under mu_: the heartbeat
  // thread compares it with the job's).
  int32_t generation_ = 0;
  int64_t handover_bytes_ = 0;   // the state this worker took when it joined
  double handover_seconds_ = 0;  // sending it (after the communicator was built)
  double join_seconds_ = 0;      // Attach's part of the join: the communicator and the state
  // From Open to that part: the program's start-up (its model and data) and the registration.
  double startup_seconds_ = 0;
  // The part of it after the registration: what the live workers waited for beyond the
  // communicator and the state (the built-in worker's start-up comes before Register).
  double startup_registered_seconds_ = 0;
  std::chrono::steady_clock::time_point opened_at_;
  std::chrono::steady_clock::time_point registered_at_;
  // The iteration begun last, for the follower's thread (WatchMembership).
  std::atomic<int64_t> begun_{-1};
  // The job's membership generation as its stream last told it, and where its epoch begins
  // (a worker's join begins after the horizon: later than the iterations running now).
  std::atomic<int32_t> job_generation_{0};
  std::atomic<int64_t> job_epoch_start_{0};
  // Whether a membership newer than `generation` applies at `iteration` or at the iteration
  // begun last: a communicator of `generation` being built or connected then is given up.
  bool MembershipMovedPast(int32_t generation, int64_t iteration) const;

  mutable std::mutex mu_;  // what the heartbeat thread touches
  std::unique_ptr<transport::Communicator> comm_ ABSL_GUARDED_BY(mu_);
  absl::Status ended_ ABSL_GUARDED_BY(mu_);  // the job's outcome once it ended (not COMPLETED)
  std::vector<int> members_ ABSL_GUARDED_BY(mu_);  // job ranks of the stretch's communicator
  std::atomic<bool> job_over_{false};
};

}  // namespace herd::worker
