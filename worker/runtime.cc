#include "worker/runtime.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status.h"
#include "common/timeline.h"
#include "scheduler/client/heartbeat_loop.h"
#include "scheduler/client/scheduler_store.h"
#include "transport/loopback/loopback_communicator.h"
#include "transport/ucx/ucx_communicator.h"

namespace herd::worker {
namespace {

using Seconds = std::chrono::duration<double>;

// Waits until every process of the job registered (the plan then has every address).
absl::StatusOr<herd::v1::JobStatus> WaitRunning(scheduler::SchedulerClient& sched,
                                                const std::string& job, Deadline deadline) {
  for (;;) {
    HERD_ASSIGN_OR_RETURN(herd::v1::JobStatus status, sched.GetJob(job));
    if (status.state() == herd::v1::JOB_RUNNING) return status;
    if (status.state() == herd::v1::JOB_CANCELLED) {
      return absl::CancelledError(
          absl::StrFormat("job '%s' was cancelled: %s", job, status.cancel_reason()));
    }
    if (deadline.expired()) {
      int workers = 0, servers = 0;
      for (const auto& m : status.workers()) workers += m.name().empty() ? 0 : 1;
      for (const auto& m : status.servers()) servers += m.name().empty() ? 0 : 1;
      return absl::DeadlineExceededError(absl::StrFormat(
          "job '%s' did not start: %d of %d workers and %d of %d servers registered", job, workers,
          status.spec().workers(), servers, status.spec().servers()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

absl::Status CheckLayout(const herd::v1::JobSpec& spec, const Trainable& model) {
  const auto layout = model.Layout();
  auto describe = [](const herd::v1::TensorSpec& t) {
    return absl::StrFormat("%s [%s] %s", t.name(), absl::StrJoin(t.shape(), "x"), t.dtype());
  };
  bool same = layout.size() == static_cast<size_t>(spec.tensors_size());
  for (size_t i = 0; same && i < layout.size(); ++i) {
    const auto& a = layout[i];
    const auto& b = spec.tensors(static_cast<int>(i));
    same = a.name() == b.name() && a.dtype() == b.dtype() &&
           std::equal(a.shape().begin(), a.shape().end(), b.shape().begin(), b.shape().end());
  }
  if (same) return absl::OkStatus();
  std::vector<std::string> want, have;
  for (const auto& t : spec.tensors()) want.push_back(describe(t));
  for (const auto& t : layout) have.push_back(describe(t));
  return absl::FailedPreconditionError(absl::StrFormat(
      "job '%s' lists the tensors {%s}, but model '%s' has {%s}; submit the job with the model's "
      "layout (herd local does)",
      spec.name(), absl::StrJoin(want, ", "), spec.training().model(), absl::StrJoin(have, ", ")));
}

// The plan of an iteration; a scheduler that is restarting (UNAVAILABLE) is retried until
// `patience` passes, since a restarted scheduler resumes the job from its state.
absl::StatusOr<herd::v1::Plan> GetPlanRidingOutRestarts(scheduler::SchedulerClient& sched,
                                                        const herd::v1::GetPlanRequest& req,
                                                        std::chrono::milliseconds patience) {
  const Deadline deadline = Deadline::After(patience);
  for (;;) {
    absl::StatusOr<herd::v1::Plan> plan = sched.GetPlan(req);
    if (plan.ok() || !absl::IsUnavailable(plan.status()) || deadline.expired()) return plan;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

std::string DefaultName() {
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  return absl::StrFormat("%s-%d", host, ::getpid());
}

}  // namespace

std::string SummaryJson(const WorkerSummary& s) {
  return absl::StrFormat(
      "{\"rank\":%d,\"iterations\":%d,\"final_loss\":%.6f,\"test_accuracy\":%.4f,"
      "\"seconds\":%.3f,\"samples_per_second\":%.1f,\"exposed_comm_seconds\":%.3f,"
      "\"executor\":\"%s\"}",
      s.rank, s.iterations, s.final_loss, s.test_accuracy, s.seconds, s.samples_per_second,
      s.exposed_comm_seconds, s.executor);
}

absl::StatusOr<WorkerSummary> ParseSummaryJson(std::string_view text) {
  // The format is SummaryJson's own: flat, one "key":value per field, no nesting.
  auto field = [&](std::string_view key) -> absl::StatusOr<std::string> {
    const std::string needle = absl::StrFormat("\"%s\":", key);
    const size_t at = text.find(needle);
    if (at == std::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrFormat("the worker summary has no '%s'", key));
    }
    size_t begin = at + needle.size(), end = begin;
    if (begin < text.size() && text[begin] == '"') {
      end = text.find('"', ++begin);
      if (end == std::string_view::npos) return absl::InvalidArgumentError("unterminated string");
    } else {
      while (end < text.size() && text[end] != ',' && text[end] != '}') ++end;
    }
    return std::string(text.substr(begin, end - begin));
  };
  WorkerSummary s;
  auto number = [&](std::string_view key, double* out) -> absl::Status {
    HERD_ASSIGN_OR_RETURN(std::string v, field(key));
    if (!absl::SimpleAtod(v, out)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("the worker summary's '%s' is not a number: %s", key, v));
    }
    return absl::OkStatus();
  };
  double rank = 0, iterations = 0;
  HERD_RETURN_IF_ERROR(number("rank", &rank));
  HERD_RETURN_IF_ERROR(number("iterations", &iterations));
  HERD_RETURN_IF_ERROR(number("final_loss", &s.final_loss));
  HERD_RETURN_IF_ERROR(number("test_accuracy", &s.test_accuracy));
  HERD_RETURN_IF_ERROR(number("seconds", &s.seconds));
  HERD_RETURN_IF_ERROR(number("samples_per_second", &s.samples_per_second));
  HERD_RETURN_IF_ERROR(number("exposed_comm_seconds", &s.exposed_comm_seconds));
  HERD_ASSIGN_OR_RETURN(s.executor, field("executor"));
  s.rank = static_cast<int>(rank);
  s.iterations = static_cast<int64_t>(iterations);
  return s;
}

absl::StatusOr<WorkerSummary> RunWorker(const WorkerOptions& options,
                                        const TrainableFactory& make_trainable) {
  HERD_ASSIGN_OR_RETURN(std::unique_ptr<scheduler::SchedulerClient> client,
                        scheduler::SchedulerClient::Connect(options.scheduler));
  std::shared_ptr<scheduler::SchedulerClient> sched = std::move(client);
  const Deadline start_deadline = Deadline::After(options.start_timeout);

  HERD_ASSIGN_OR_RETURN(herd::v1::JobStatus job, sched->GetJob(options.job));
  herd::v1::RegisterNodeRequest reg;
  reg.set_job(options.job);
  reg.set_role(herd::v1::ROLE_WORKER);
  reg.set_name(options.name.empty() ? DefaultName() : options.name);
  reg.set_host("127.0.0.1");
  if (options.rank) reg.set_requested_rank(*options.rank);
  HERD_ASSIGN_OR_RETURN(herd::v1::RegisterNodeResponse registered, sched->RegisterNode(reg));
  const int rank = registered.rank();
  scheduler::HeartbeatLoop heartbeats(*sched, options.job, registered,
                                      absl::StrFormat("worker %d", rank));
  const herd::v1::JobSpec& spec = job.spec();
  const int world = spec.workers();
  Log().info("worker {} of {} in job '{}' ({} {}, {} epoch(s), batch {})", rank, world, options.job,
             spec.training().model(), spec.mode().mode(), spec.training().epochs(),
             spec.training().batch_size());

  HERD_ASSIGN_OR_RETURN(std::unique_ptr<Trainable> model, make_trainable({spec, rank, world}));
  HERD_RETURN_IF_ERROR(CheckLayout(spec, *model));
  HERD_RETURN_IF_ERROR(WaitRunning(*sched, options.job, start_deadline).status());

  Timeline timeline =
      options.timeline_dir.empty()
          ? Timeline()
          : Timeline(absl::StrFormat("%s/worker-%d.json", options.timeline_dir, rank), rank);
  model->set_timeline(&timeline);
  auto store = scheduler::MakeSchedulerStore(sched, options.job);

  const int64_t per_epoch = model->BatchesPerEpoch();
  const int64_t total = per_epoch * spec.training().epochs();
  std::unique_ptr<transport::Communicator> comm;
  std::unique_ptr<Executor> executor;
  std::string executor_mode;  // the serialized ModeSpec the executor runs
  WorkerSummary summary;
  summary.rank = rank;
  const auto begin = std::chrono::steady_clock::now();
  int64_t samples = 0;
  // The last iteration's report waits for the evaluation, so it carries the test accuracy.
  herd::v1::ReportIterationRequest last_report;

  for (int64_t it = 0; it < total; ++it) {
    herd::v1::GetPlanRequest req;
    req.set_job(options.job);
    req.set_iteration(it);
    req.set_node_id(registered.node_id());
    HERD_ASSIGN_OR_RETURN(herd::v1::Plan plan,
                          GetPlanRidingOutRestarts(*sched, req, options.timeout));
    if (plan.job_cancelled()) {
      return absl::CancelledError(absl::StrFormat("job '%s' was cancelled", options.job));
    }
    const std::string& mode = plan.mode().mode();
    if (ModeUsesCommunicator(mode) && plan.ranks_size() < world) {
      std::vector<int> missing;
      for (int r = 0; r < world; ++r) {
        if (std::find(plan.ranks().begin(), plan.ranks().end(), r) == plan.ranks().end()) {
          missing.push_back(r);
        }
      }
      return absl::UnavailableError(
          absl::StrFormat("iteration %d: worker(s) %s left job '%s'; mode %s needs all %d workers",
                          it, absl::StrJoin(missing, ", "), options.job, mode, world));
    }
    const std::string mode_key = plan.mode().SerializeAsString();
    if (executor == nullptr || mode_key != executor_mode) {
      Timeline::Span span(&timeline, "switch to " + mode, Timeline::Lane::kControl);
      if (executor) {
        HERD_RETURN_IF_ERROR(executor->Flush());
        summary.exposed_comm_seconds += executor->TakeExposedSeconds();
        executor.reset();
      }
      comm.reset();
      if (ModeUsesCommunicator(mode) && world > 1) {
        transport::UcxOptions ucx;
        ucx.prefix = absl::StrFormat("stretch-%d", it);  // the same on every rank
        ucx.bootstrap_timeout = options.start_timeout;
        HERD_ASSIGN_OR_RETURN(comm, transport::CreateUcxCommunicator(rank, world, store, ucx));
      } else if (ModeUsesCommunicator(mode)) {
        comm = std::move(transport::MakeLoopbackCommunicators(1)[0]);  // a job of one worker
      }
      ExecutorContext ctx;
      ctx.plan = plan;
      ctx.rank = rank;
      ctx.comm = comm.get();
      ctx.tensors = model->tensors();
      auto opt = optim::ParseOptimizer(spec.optimizer().name());
      if (!opt.ok()) return opt.status();
      ctx.optimizer.kind = *opt;
      ctx.optimizer.learning_rate = spec.optimizer().learning_rate();
      if (spec.optimizer().momentum() > 0) ctx.optimizer.momentum = spec.optimizer().momentum();
      ctx.optimizer.weight_decay = spec.optimizer().weight_decay();
      ctx.fusion = options.fusion;
      ctx.timeout = options.timeout;
      ctx.timeline = &timeline;
      ctx.ps_token = options.scheduler.token;
      ctx.first_iteration = it;
      HERD_ASSIGN_OR_RETURN(executor, MakeExecutor(ctx));
      executor_mode = mode_key;
      Log().info("worker {}: iteration {}: {}", rank, it, executor->Describe());
    }

    const auto iteration_begin = std::chrono::steady_clock::now();
    HERD_RETURN_IF_ERROR(executor->BeginIteration(it));
    absl::StatusOr<StepStats> step;
    {
      Timeline::Span span(&timeline, absl::StrFormat("iteration %d", it), Timeline::Lane::kControl);
      step = model->Step(*executor, it / per_epoch, it % per_epoch);
    }
    if (!step.ok()) return step.status();
    const double exposed = executor->TakeExposedSeconds();
    summary.exposed_comm_seconds += exposed;
    samples += step->samples;
    summary.final_loss = step->loss;

    herd::v1::ReportIterationRequest report;
    report.set_job(options.job);
    report.set_node_id(registered.node_id());
    report.set_iteration(it);
    auto* st = report.mutable_stats();
    st->set_loss(step->loss);
    st->set_iteration_seconds(Seconds(std::chrono::steady_clock::now() - iteration_begin).count());
    st->set_forward_seconds(step->forward_seconds);
    st->set_backward_seconds(step->backward_seconds);
    st->set_exposed_comm_seconds(exposed);
    st->set_samples(step->samples);
    if (it == total - 1) {
      last_report = report;
    } else if (auto r = sched->ReportIteration(report); !r.ok()) {
      Log().warn("worker {}: report of iteration {}: {}", rank, it, r.status().ToString());
    }
  }
  if (executor) {
    HERD_RETURN_IF_ERROR(executor->Flush());
    summary.exposed_comm_seconds += executor->TakeExposedSeconds();
    summary.executor = executor->Describe();
  }
  summary.iterations = total;
  summary.seconds = Seconds(std::chrono::steady_clock::now() - begin).count();
  summary.samples_per_second =
      summary.seconds > 0 ? static_cast<double>(samples) * world / summary.seconds : 0;

  if (rank == 0) {
    Timeline::Span span(&timeline, "evaluate", Timeline::Lane::kCompute);
    HERD_ASSIGN_OR_RETURN(summary.test_accuracy, model->Evaluate());
    last_report.mutable_stats()->set_accuracy(summary.test_accuracy);
  }
  if (total > 0) {
    if (auto r = sched->ReportIteration(last_report); !r.ok()) {
      Log().warn("worker {}: report of the last iteration: {}", rank, r.status().ToString());
    }
  }
  HERD_RETURN_IF_ERROR(timeline.Write());
  if (!options.result_file.empty()) {
    const std::string tmp = options.result_file + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << SummaryJson(summary) << "\n";
      if (!out.flush()) {
        return absl::InternalError("cannot write the result file " + options.result_file);
      }
    }
    if (std::rename(tmp.c_str(), options.result_file.c_str()) != 0) {
      return absl::InternalError("cannot write the result file " + options.result_file);
    }
  }
  return summary;
}

}  // namespace herd::worker
