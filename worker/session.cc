#include "worker/session.h"

#include <unistd.h>

#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/retry.h"
#include "common/status.h"
#include "metrics/endpoint.h"
#include "metrics/worker_metrics.h"
#include "plan/modes.h"
#include "scheduler/client/job_states.h"
#include "scheduler/client/job_wait.h"
#include "worker/counting_communicator.h"
#include "worker/executor_state.h"
#include "worker/scheduler_store.h"
#include "worker/stretch.h"
#include "worker/training_memory.h"
#include "worker/watched_store.h"

namespace herd::worker {
namespace {

using Seconds = std::chrono::duration<double>;

std::string DefaultName() {
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  return absl::StrFormat("%s-%d", host, ::getpid());
}

// What the job's JobStatus says about its ending, as a plan would carry it.
std::string EndReason(const herd::v1::JobStatus& s) {
  if (s.state() == herd::v1::JOB_CANCELLED) return s.cancel_reason();
  if (s.state() == herd::v1::JOB_FAILED) {
    return absl::StrFormat("%s: %s", s.failed_process(), s.failure_reason());
  }
  return "";
}

}  // namespace

Session::Session(SessionOptions options, std::shared_ptr<scheduler::SchedulerClient> client)
    : options_(std::move(options)), client_(std::move(client)) {}

Session::~Session() {
  follower_.reset();  // joins the threads that may touch comm_
  if (executor_) executor_.reset();
  std::lock_guard<std::mutex> lock(mu_);
  comm_.reset();
}

absl::StatusOr<std::unique_ptr<Session>> Session::Open(SessionOptions options) {
  if (options.job.empty()) {
    return absl::InvalidArgumentError("no job to join: give --job (or HERD_JOB)");
  }
  if (options.name.empty()) options.name = DefaultName();
  if (const std::string memory = KeepTrainingMemory(); !memory.empty()) {
    Log().debug("worker '{}': {}", options.name, memory);
  }
  if (!options.metrics_listen.empty()) {
    HERD_ASSIGN_OR_RETURN(
        const metrics::Endpoint* endpoint,
        metrics::StartProcessEndpoint(options.metrics_listen, metrics::Role::kWorker));
    Log().info("worker '{}': metrics at {}", options.name, endpoint->url());
  }
  HERD_ASSIGN_OR_RETURN(std::unique_ptr<scheduler::SchedulerClient> client,
                        scheduler::SchedulerClient::Connect(options.scheduler));
  std::unique_ptr<Session> session(new Session(std::move(options), std::move(client)));
  session->opened_at_ = std::chrono::steady_clock::now();
  HERD_RETURN_IF_ERROR(session->AwaitJob().status());
  return session;
}

absl::StatusOr<std::unique_ptr<Session>> Session::Join(SessionOptions options) {
  HERD_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Open(std::move(options)));
  HERD_RETURN_IF_ERROR(session->Register());
  return session;
}

absl::StatusOr<herd::v1::JobStatus> Session::AwaitJob() {
  const std::string what = absl::StrFormat("worker '%s'", options_.name);
  HERD_ASSIGN_OR_RETURN(
      herd::v1::JobStatus job,
      scheduler::WaitForJob(*client_, options_.job, Deadline::After(options_.wait_for_job), what,
                            std::chrono::milliseconds(500), /*brief=*/true));
  if (scheduler::IsTerminal(job.state())) {
    HERD_RETURN_IF_ERROR(scheduler::JobEndedStatus(job));
    return absl::FailedPreconditionError(absl::StrFormat(
        "job '%s' has already completed; there is nothing left for %s to do", options_.job, what));
  }
  spec_ = job.spec();
  elastic_ = spec_.has_elastic();
  return job;
}

absl::Status Session::Register() {
  if (is_registered_) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "worker '%s' has registered in job '%s' already", options_.name, options_.job));
  }
  // The job as it is now: the program may have spent a while on its start-up since Open.
  HERD_ASSIGN_OR_RETURN(herd::v1::JobStatus job, AwaitJob());
  herd::v1::RegisterNodeRequest reg;
  reg.set_job(options_.job);
  reg.set_role(herd::v1::ROLE_WORKER);
  reg.set_name(options_.name);
  reg.set_host(options_.host);
  if (options_.rank) reg.set_requested_rank(*options_.rank);
  // A restarted process that takes its slot back by name is refused (ALREADY_EXISTS) until the
  // scheduler has declared its predecessor dead (within its heartbeat timeout): wait for that.
  const Deadline register_by = Deadline::After(options_.start_timeout);
  for (bool told = false;;) {
    absl::StatusOr<herd::v1::RegisterNodeResponse> got = client_->RegisterNode(reg);
    if (got.ok()) {
      registered_ = *std::move(got);
      break;
    }
    if (!absl::IsAlreadyExists(got.status()) || register_by.expired()) return got.status();
    if (!std::exchange(told, true)) {
      Log().info("worker '{}': waiting to register: {}", options_.name,
                 std::string(got.status().message()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  registered_at_ = std::chrono::steady_clock::now();
  is_registered_ = true;
  rank_ = registered_.rank();
  member_index_ = rank_;
  // Registered into an elastic job that runs: this worker joins at the new epoch and takes the
  // state from the live workers (Attach), not from the model it builds nor from a checkpoint.
  joining_ = registered_.joins_running_job();
  checkpoints_.Bind(registered_.node_id(), rank_);
  HERD_RETURN_IF_ERROR(OpenResume(job));
  // A joiner keeps the job's start (its iteration count depends on it) but reads no state from
  // the checkpoint the job resumed from.
  if (joining_) checkpoints_.ForgetResume();
  if (options_.preemptible != nullptr) {
    options_.preemptible->store(!spec_.checkpoint().dir().empty());
  }
  store_ = MakeSchedulerStore(client_, options_.job);
  if (!options_.timeline_dir.empty()) {
    timeline_ = std::make_unique<Timeline>(
        absl::StrFormat("%s/worker-%d.json", options_.timeline_dir, rank_), rank_);
  }
  PlanFollower::Options follow;
  follow.job = options_.job;
  follow.rank = rank_;
  follow.on_view = [this](const herd::v1::EpochView& view) {
    if (elastic_) WatchMembership(view);
    if (!scheduler::IsTerminal(view.job_state()) || view.job_state() == herd::v1::JOB_COMPLETED ||
        view.job_state() == herd::v1::JOB_PREEMPTED) {
      return;
    }
    NoteJobEnded(view.job_state(), view.end_reason());
  };
  // A worker blocked in a collective still asks for its preemption checkpoint.
  follow.on_interval = [this] { MaybeRequestPreemption(); };
  follower_ = std::make_unique<PlanFollower>(*client_, std::move(follow), registered_);
  Log().info("worker {} of {} in job '{}' ({} {}, {} epoch(s), batch {}){}", rank_, spec_.workers(),
             options_.job, spec_.training().model(), spec_.mode().mode(), spec_.training().epochs(),
             spec_.training().batch_size(), joining_ ? " joins the running job" : "");
  return absl::OkStatus();
}

absl::Status Session::Attach(std::vector<ModelTensor> tensors,
                             std::vector<herd::v1::TensorSpec> layout, int64_t planned_iterations) {
  if (!is_registered_) {
    return absl::FailedPreconditionError("Register with the job before Attach");
  }
  if (tensors.size() != layout.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the model has %d tensors but its layout lists %d", tensors.size(), layout.size()));
  }
  herd::v1::DeclareModelRequest req;
  req.set_job(options_.job);
  req.set_node_id(registered_.node_id());
  for (const auto& t : layout) *req.add_tensors() = t;
  req.set_planned_iterations(planned_iterations);
  req.set_brief(true);  // an answer that does not grow with the job
  planned_iterations_ = planned_iterations;
  layout_ = layout;
  HERD_ASSIGN_OR_RETURN(herd::v1::JobStatus status, client_->DeclareModel(req));
  spec_ = status.spec();
  tensors_ = std::move(tensors);
  // A resumed job starts from its checkpoint's parameters (the executor's state follows when
  // the first executor is built).
  HERD_RETURN_IF_ERROR(
      checkpoints_.ImportParameters(layout, ImportWhere{rank_, world_size()}, tensors_));
  HERD_RETURN_IF_ERROR(WaitRunning());
  return joining_ ? JoinRunningJob() : absl::OkStatus();
}

absl::Status Session::WaitRunning() {
  const Deadline deadline = Deadline::After(options_.start_timeout);
  // The job starts when every process is there: its stream says so (no polling).
  const scheduler::Follower::State state = follower_->WaitFor(
      [](const scheduler::Follower::State& s) {
        return !s.refused.ok() ||
               (s.view != nullptr && s.view->job_state() != herd::v1::JOB_PENDING);
      },
      deadline);
  if (!state.refused.ok()) return state.refused;
  for (;;) {
    HERD_ASSIGN_OR_RETURN(herd::v1::JobStatus status, client_->GetJobBrief(options_.job));
    if (status.state() == herd::v1::JOB_RUNNING) {
      spec_ = status.spec();
      return absl::OkStatus();
    }
    if (scheduler::IsTerminal(status.state())) return scheduler::JobEndedStatus(status);
    if (deadline.expired()) {
      HERD_ASSIGN_OR_RETURN(status, client_->GetJob(options_.job));  // who is missing
      int workers = 0, servers = 0;
      for (const auto& m : status.workers()) workers += m.alive() ? 1 : 0;
      for (const auto& m : status.servers()) servers += m.alive() ? 1 : 0;
      return absl::DeadlineExceededError(absl::StrFormat(
          "job '%s' did not start within %d s: %d of %d workers and %d of %d servers are there%s",
          options_.job,
          std::chrono::duration_cast<std::chrono::seconds>(options_.start_timeout).count(), workers,
          status.spec().workers(), servers, status.spec().servers(),
          status.spec().tensors_size() == 0 ? ", and no worker declared the model yet" : ""));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

absl::StatusOr<herd::v1::Plan> Session::FetchPlan(int64_t iteration) {
  return follower_->PlanOf(spec_, iteration, Deadline::After(options_.timeout));
}

absl::StatusOr<herd::v1::Plan> Session::AskPlan(int64_t iteration) {
  herd::v1::GetPlanRequest req;
  req.set_job(options_.job);
  req.set_iteration(iteration);
  req.set_node_id(registered_.node_id());
  // A restarted scheduler resumes the job from its state: ride out its restart.
  return RetryWhileUnavailable([&] { return client_->GetPlan(req); },
                               Deadline::After(options_.timeout));
}

absl::StatusOr<Executor*> Session::BeginIteration(int64_t iteration) {
  if (tensors_.empty()) {
    return absl::FailedPreconditionError("Attach the model before the first iteration");
  }
  if (finished_) return absl::FailedPreconditionError("the session has finished");
  // Where a rollback to this iteration resumes the data (elastic jobs).
  rollback_.NotePosition(iteration, position_);
  absl::StatusOr<herd::v1::Plan> plan = FetchPlan(iteration);
  if (!plan.ok()) return Explain(plan.status());
  if (scheduler::IsTerminal(plan->job_state())) {
    NoteJobEnded(plan->job_state(), plan->end_reason());
    if (plan->job_state() == herd::v1::JOB_PREEMPTED) {
      preempted_ = true;
      return absl::CancelledError(
          absl::StrFormat("job '%s' was preempted: %s", options_.job, plan->end_reason()));
    }
    if (plan->job_state() == herd::v1::JOB_COMPLETED) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "job '%s' completed before this worker's iteration %d", options_.job, iteration));
    }
    return job_outcome();
  }
  MaybeRequestPreemption();
  if (preemption_asked_.load() && std::chrono::steady_clock::now() > preempt_deadline_) {
    return absl::DeadlineExceededError(absl::StrFormat(
        "worker %d: the job did not stop within the preemption grace after SIGTERM", rank_));
  }
  // The cut of a checkpoint: the state before this iteration is saved first (by the executor
  // of the previous iteration, before any mode switch at this one).
  if (plan->checkpoint_iteration() == iteration &&
      plan->checkpoint_id() != checkpoints_.staged_id()) {
    if (executor_ == nullptr) HERD_RETURN_IF_ERROR(Explain(SwitchTo(*plan, iteration)));
    HERD_RETURN_IF_ERROR(Explain(TakeCheckpoint(*plan)));
  }
  if (plan->stop_at_checkpoint() && plan->checkpoint_iteration() == iteration) {
    return Explain(StopAtCheckpoint(*plan));
  }
  if (elastic_ && executor_ != nullptr && !ModeUsesCommunicator(plan->mode().mode()) &&
      plan->membership_generation() != generation_) {
    HERD_RETURN_IF_ERROR(FollowShrinkOnShards(*plan, iteration));
  }
  if (elastic_ && MembershipChanged(*plan)) {
    // A worker joins at this boundary (its epoch begins after the horizon): the state after the
    // iteration before is what every worker goes on from, so dear's last report settles first.
    if (iteration == plan->epoch_start_iteration()) (void)SettleLaggedReport();
    // A peer of this stretch died: the iteration may be one the survivors run again from an
    // earlier commit (Recover says which), never with the old communicator.
    return absl::UnavailableError(absl::StrFormat(
        "iteration %d of job '%s': its live workers changed (%s)", iteration, options_.job,
        plan->pause_reason().empty() ? "a worker left" : plan->pause_reason()));
  }
  if (elastic_ && rollback_.empty() && ModeUsesCommunicator(plan->mode().mode())) {
    // The state before the first iteration: what a death during it rolls back to.
    HERD_RETURN_IF_ERROR(CommitIteration(iteration - 1));
  }
  if (plan->mode().SerializeAsString() != executor_key_ || executor_ == nullptr) {
    HERD_RETURN_IF_ERROR(Explain(SwitchTo(*plan, iteration)));
  }
  metrics::WorkerMetrics::Get().SetPlan(plan->mode().mode(), plan->epoch());
  iteration_ = iteration;
  begun_.store(iteration);
  iteration_begin_ = std::chrono::steady_clock::now();
  HERD_RETURN_IF_ERROR(Explain(executor_->BeginIteration(iteration)));
  return executor_.get();
}

absl::Status Session::SwitchTo(const herd::v1::Plan& plan, int64_t iteration) {
  const std::string& mode = plan.mode().mode();
  Timeline::Span span(timeline_.get(), "switch to " + mode, Timeline::Lane::kControl);
  HERD_ASSIGN_OR_RETURN(const StretchLayout layout, LayOutStretch(plan, spec_.workers(), elastic_,
                                                                  rank_, options_.job, iteration));
  const bool collective = layout.collective;
  const int index = layout.index;
  const int size = layout.size;
  // What the old executor carried from iteration to iteration (optimizer slots, residuals,
  // replicas, ...) goes to the new one: a switch keeps momentum and residuals instead of
  // dropping them (checkpoint/state.h; the rules of the new mode decide what it takes).
  std::optional<checkpoint::ProcessState> carried;
  if (executor_) {
    HERD_RETURN_IF_ERROR(SettleLaggedReport());  // dear's last iteration, before it goes
    HERD_ASSIGN_OR_RETURN(carried, TakeExecutorState(*executor_, member_index_));
    exposed_seconds_ += executor_->TakeExposedSeconds();
    executor_.reset();
  } else if (restored_) {
    carried = std::move(*restored_);  // a rollback's commit (Recover)
    restored_.reset();
  }
  // This worker's own state, whatever its position was: it imports as its own.
  if (carried) carried->process = checkpoint::WorkerProcess(index);
  std::unique_ptr<transport::Communicator> comm;
  if (collective) {
    StretchConnect how;
    how.backend = options_.transport;
    how.store = store_;
    how.bootstrap_timeout = options_.start_timeout;
    if (elastic_) {
      // Given up once the job's membership moved past this plan's (a peer builds the newer
      // communicator instead): the error leads to Recover and the newer epoch.
      const int32_t generation = plan.membership_generation();
      how.moved_past = [this, generation, iteration] {
        return MembershipMovedPast(generation, iteration);
      };
      how.what = absl::StrFormat("worker %d, iteration %d", rank_, iteration);
    }
    HERD_ASSIGN_OR_RETURN(comm, ConnectStretch(layout, plan, iteration, how));
    comm = std::make_unique<CountingCommunicator>(
        std::move(comm),
        metrics::WorkerMetrics::Get().SentBytes(mode, metrics::WorkerMetrics::Peer::kWorker));
    // After a membership change a worker may join this stretch: the live workers hand it the
    // state before any executor runs (session_elastic.cc).
    if (elastic_ && plan.membership_generation() > 0) {
      HERD_RETURN_IF_ERROR(HandOverState(*comm, iteration, carried));
    }
  }
  ExecutorContext ctx;
  ctx.plan = layout.run;
  ctx.rank = index;
  ctx.comm = comm.get();
  ctx.tensors = tensors_;
  if (optimizer_override_) {
    ctx.optimizer = *optimizer_override_;
  } else {
    HERD_ASSIGN_OR_RETURN(ctx.optimizer, JobOptimizer());
  }
  ctx.fusion = options_.fusion;
  ctx.timeout = options_.timeout;
  ctx.timeline = timeline_.get();
  ctx.ps_token = options_.scheduler.token;
  ctx.ps_tls = options_.server_tls;
  ctx.ps_tls_ca_file = options_.server_tls_ca_file;
  ctx.ps_cancel = ps_cancel_;
  ctx.shard_address = [follower = follower_.get(),
                       job = options_.job](int shard) -> absl::StatusOr<std::string> {
    // The shards as the newest view has them (a restarted shard's new address comes with it).
    std::shared_ptr<const herd::v1::EpochView> view = follower->View();
    if (view == nullptr || shard < 0 || shard >= view->servers_size() ||
        !view->servers(shard).alive()) {
      return absl::UnavailableError(
          absl::StrFormat("shard %d of job '%s' is not alive", shard, job));
    }
    return view->servers(shard).address();
  };
  ctx.first_iteration = iteration;
  {
    std::lock_guard<std::mutex> lock(mu_);
    comm_ = std::move(comm);
    members_.clear();
    if (collective) members_.assign(plan.ranks().begin(), plan.ranks().end());
    generation_ = plan.membership_generation();
    // The job may have ended while the communicator was being built.
    if (!ended_.ok() && comm_) (void)comm_->abort(ended_);
  }
  HERD_ASSIGN_OR_RETURN(executor_, MakeExecutor(ctx));
  if (carried) {
    if (auto st = GiveExecutorState(*executor_, std::move(*carried), size); !st.ok()) {
      executor_.reset();
      return st;
    }
  }
  executor_key_ = plan.mode().SerializeAsString();
  member_index_ = index;
  members_count_ = size;
  if (elastic_ && !collective && plan.ranks_size() > 0) {
    // The shards' modes keep the job's ranks for the shards, but split the data among the live
    // workers as FollowShrinkOnShards does (a worker back in its slot while another is still
    // dead takes the same share as the survivors give it).
    shard_live_nodes_ = ShardLiveNodes(plan);
    if (const int live_index = MemberIndex(plan, rank_); live_index >= 0) {
      member_index_ = live_index;
      members_count_ = plan.ranks_size();
    }
  }
  // The first executor of a resumed job takes the checkpoint's state.
  HERD_RETURN_IF_ERROR(checkpoints_.ImportInto(*executor_));
  Log().info("worker {}: iteration {}: {}", rank_, iteration, executor_->Describe());
  return absl::OkStatus();
}

std::map<int, uint64_t> Session::ShardLiveNodes(const herd::v1::Plan& plan) {
  // The process holding each live rank: the epoch it registered into the running job at (0:
  // the one the rank started with). A worker back in its slot is a new incarnation.
  std::map<int, uint64_t> nodes;
  for (int r : plan.ranks()) nodes[r] = 0;
  for (const auto& inc : plan.incarnations()) {
    if (auto it = nodes.find(inc.rank()); it != nodes.end()) it->second = inc.epoch();
  }
  return nodes;
}

absl::StatusOr<optim::OptimizerConfig> Session::JobOptimizer() const {
  optim::OptimizerConfig config;
  HERD_ASSIGN_OR_RETURN(config.kind, optim::ParseOptimizer(spec_.optimizer().name()));
  config.learning_rate = spec_.optimizer().learning_rate();
  if (spec_.optimizer().momentum() > 0) config.momentum = spec_.optimizer().momentum();
  config.weight_decay = spec_.optimizer().weight_decay();
  return config;
}

bool Session::OptimizerOnShards(std::string_view mode) {
  // Where the shards keep the optimizer's slots they apply it (ps_sync, ps_async); ps_ec's
  // workers keep theirs and step themselves.
  const plan::ModeInfo* info = plan::FindMode(mode);
  return info != nullptr && info->server_state.contains(plan::State::kOptimizerSlots);
}

absl::Status Session::EndIteration(const StepStats& step) {
  if (executor_ == nullptr || iteration_ < 0) {
    return absl::FailedPreconditionError("EndIteration without BeginIteration");
  }
  const double exposed = executor_->TakeExposedSeconds();
  exposed_seconds_ += exposed;
  // dear in an elastic job: the state right now is that after the iteration before (its
  // updates of this one apply during the next forward); it is committed without waiting for
  // the all-gathers in flight, and this iteration's report waits for its own commit.
  const bool lagged =
      elastic_ && ModeUsesCommunicator(executor_->mode()) && executor_->StateLag() > 0;
  if (lagged) {
    HERD_RETURN_IF_ERROR(Explain(CommitIteration(iteration_ - 1, /*flush=*/false)));
  } else if (elastic_ && ModeUsesCommunicator(executor_->mode())) {
    HERD_RETURN_IF_ERROR(Explain(CommitIteration(iteration_)));
  }
  herd::v1::ReportIterationRequest report;
  report.set_job(options_.job);
  report.set_node_id(registered_.node_id());
  report.set_iteration(iteration_);
  last_ended_ = iteration_;
  auto* st = report.mutable_stats();
  st->set_loss(step.loss);
  st->set_iteration_seconds(Seconds(std::chrono::steady_clock::now() - iteration_begin_).count());
  st->set_forward_seconds(step.forward_seconds);
  st->set_backward_seconds(step.backward_seconds);
  st->set_exposed_comm_seconds(exposed);
  st->set_samples(step.samples);
  metrics::WorkerMetrics::Get().RecordIteration({.iteration = iteration_,
                                                 .loss = step.loss,
                                                 .samples = step.samples,
                                                 .seconds = st->iteration_seconds(),
                                                 .forward_seconds = step.forward_seconds,
                                                 .backward_seconds = step.backward_seconds,
                                                 .exposed_comm_seconds = exposed});
  if (lagged) {
    if (lagged_report_ && lagged_report_->iteration() == iteration_ - 1) {
      SendReport(*lagged_report_);
    }
    lagged_report_ = std::move(report);
    return absl::OkStatus();
  }
  SendReport(report);
  return absl::OkStatus();
}

void Session::SendReport(const herd::v1::ReportIterationRequest& report) {
  // Batched with the follower's next message (rank 0's within a quarter second, the others'
  // with their heartbeats); a report lost to a scheduler restart is sent again on the next
  // stream.
  follower_->Completed(report.iteration(), report.stats());
}

absl::Status Session::Flush() {
  if (executor_ == nullptr) return absl::OkStatus();
  HERD_RETURN_IF_ERROR(Explain(executor_->Flush()));
  HERD_RETURN_IF_ERROR(Explain(SettleLaggedReport()));
  HERD_RETURN_IF_ERROR(AwaitLiveWorkersAt(last_ended_));
  exposed_seconds_ += executor_->TakeExposedSeconds();
  executor_description_ = executor_->Describe();
  return absl::OkStatus();
}

absl::StatusOr<herd::v1::JobStatus> Session::Finish(herd::v1::TrainingResult result) {
  if (lagged_report_) HERD_RETURN_IF_ERROR(Flush());  // the last iteration's report
  if (executor_description_.empty() && executor_) executor_description_ = executor_->Describe();
  if (result.executor().empty()) result.set_executor(executor_description_);
  if (result.params_digest().empty()) result.set_params_digest(ParamsDigest());
  if (planned_iterations_ <= 0) HERD_RETURN_IF_ERROR(DeclareEnd());
  HERD_RETURN_IF_ERROR(TakeFinalCheckpoint());
  if (rollback_.commits_taken() > 0) {
    (*result.mutable_metrics())["elastic_commit_ms"] = rollback_.mean_commit_ms();
  }
  if (handover_bytes_ > 0) {
    (*result.mutable_metrics())["elastic_handover_bytes"] = static_cast<double>(handover_bytes_);
    (*result.mutable_metrics())["elastic_handover_ms"] = 1000.0 * handover_seconds_;
  }
  // A worker that joined the running job; ps_async's takes no state from a peer (it pulls).
  if (join_seconds_ > 0) {
    (*result.mutable_metrics())["elastic_join_ms"] = 1000.0 * join_seconds_;
    (*result.mutable_metrics())["elastic_startup_ms"] = 1000.0 * startup_seconds_;
    (*result.mutable_metrics())["elastic_startup_registered_ms"] =
        1000.0 * startup_registered_seconds_;
  }
  // A checkpoint staged near the end is written and reported before the job may complete.
  HERD_RETURN_IF_ERROR(DrainCheckpoints(Deadline::After(options_.timeout)));
  // Every worker waits here for the others to finish their last iteration before leaving:
  // a rank that closed its communicator while a peer still received from it (the decentralized
  // modes exchange with neighbours to the very end) would fail that peer.
  if (world_size() > 1) {
    herd::v1::BarrierRequest barrier;
    barrier.set_job(options_.job);
    barrier.set_name("training finished");
    barrier.set_node_id(registered_.node_id());
    auto passed = client_->Barrier(barrier, Deadline::After(options_.timeout));
    if (!passed.ok()) return Diagnose(passed.status());
  }
  // The last iterations' reports (rank 0's are the job's history) are in before it finishes.
  if (auto st = follower_->Flush(Deadline::After(options_.timeout)); !st.ok()) {
    Log().warn("worker {}: {}", rank_, std::string(st.message()));
  }
  herd::v1::FinishWorkerRequest req;
  req.set_job(options_.job);
  req.set_brief(true);
  req.set_node_id(registered_.node_id());
  *req.mutable_result() = std::move(result);
  HERD_RETURN_IF_ERROR(timeline_->Write());
  absl::StatusOr<herd::v1::JobStatus> status = client_->FinishWorker(req);
  if (!status.ok()) return Explain(status.status());
  finished_ = true;
  if (options_.preemptible != nullptr) options_.preemptible->store(false);
  // A finished worker stops heartbeating: the scheduler does not count that as a death.
  follower_.reset();
  return status;
}

void Session::Fail(const absl::Status& why) {
  if (job_over_.load() || why.ok()) return;
  if (!is_registered_) {
    // Not a worker of the job: its failure is its own (the caller registers first to fail it).
    Log().warn("worker '{}': {}", options_.name, why.ToString());
    return;
  }
  herd::v1::FailJobRequest req;
  req.set_job(options_.job);
  req.set_node_id(registered_.node_id());
  req.set_reason(std::string(why.message()));
  if (auto st = client_->FailJob(req); !st.ok()) {
    Log().warn("worker {}: could not report the failure to the scheduler: {}", rank_,
               st.status().ToString());
  }
}

void Session::NoteJobEnded(herd::v1::JobState state, const std::string& reason) {
  if (job_over_.exchange(true)) return;
  if (state == herd::v1::JOB_COMPLETED || state == herd::v1::JOB_PREEMPTED) return;
  const absl::Status outcome = scheduler::JobEndedStatus(options_.job, state, reason);
  std::lock_guard<std::mutex> lock(mu_);
  ended_ = outcome;
  // Wakes a rank blocked in a collective whose peer stopped: it returns at once; and one
  // blocked on a shard, waiting for a round a dead worker will never complete.
  if (comm_) (void)comm_->abort(outcome);
  ps_cancel_->Cancel(outcome);
  Log().warn("worker {}: {}", rank_, std::string(outcome.message()));
}

absl::Status Session::job_outcome() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ended_;
}

absl::Status Session::Diagnose(absl::Status st) {
  if (st.ok() || !job_outcome().ok()) return Explain(st);
  // A peer that failed reports it and exits; this worker may see the broken connection a
  // moment before the scheduler's FAILED. Wait briefly for the root cause.
  const bool consequence = absl::IsUnavailable(st) || absl::IsAborted(st) ||
                           absl::IsDeadlineExceeded(st) || absl::IsCancelled(st);
  const Deadline deadline = Deadline::After(std::chrono::seconds(consequence ? 3 : 0));
  for (;;) {
    auto status = client_->GetJobBrief(options_.job);
    if (status.ok() && scheduler::IsTerminal(status->state())) {
      NoteJobEnded(status->state(), EndReason(*status));
      return Explain(st);
    }
    if (deadline.expired()) return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

absl::Status Session::Explain(absl::Status st) const {
  if (st.ok()) return st;
  absl::Status outcome = job_outcome();
  return outcome.ok() ? st : outcome;
}

}  // namespace herd::worker
