// `herd job`: the operator's client of the scheduler. Subcommands submit, status, list,
// set-mode, plan, checkpoint, cancel and delete, all with --scheduler ADDR (docs/scheduler.md,
// "Command line"); and validate, which checks a JobSpec file offline.

#include <google/protobuf/util/json_util.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "cli/command.h"
#include "cli/job_file.h"
#include "cli/mode_options.h"
#include "common/printable.h"
#include "plan/modes.h"
#include "proto/rpc/grpc_support.h"
#include "scheduler/client/job_states.h"
#include "scheduler/client/job_yaml.h"
#include "scheduler/client/scheduler_client.h"
#include "scheduler/job_spec.h"
#include "scheduler/service.h"

namespace herd::cli {
namespace {

using herd::v1::JobStatus;
using herd::v1::Plan;

std::string ModeText(const herd::v1::ModeSpec& m) {
  std::vector<std::string> params;
  if (!m.topology().empty()) params.push_back("topology " + m.topology());
  if (m.teams() != 0) params.push_back(absl::StrFormat("teams %d", m.teams()));
  if (m.density() != 0) params.push_back(absl::StrFormat("density %g", m.density()));
  if (m.block_bytes() != 0) params.push_back(absl::StrFormat("block_bytes %d", m.block_bytes()));
  if (m.has_staleness()) params.push_back(absl::StrFormat("staleness %d", m.staleness()));
  if (!m.compressor().empty()) params.push_back("compressor " + m.compressor());
  if (params.empty()) return m.mode();
  return absl::StrFormat("%s (%s)", m.mode(), absl::StrJoin(params, ", "));
}

std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

template <typename Repeated>
std::string IntList(const Repeated& v) {
  return "[" + absl::StrJoin(v, ",") + "]";
}

// The plan as one JSON object: epoch, iteration, mode, and `peers`, a list indexed by rank of
// the ranks each exchanges with in this iteration; then ring, teams and the shard map.
std::string PlanJson(const Plan& p) {
  std::vector<std::string> peers, teams, shards, workers;
  for (const auto& l : p.peers()) peers.push_back(IntList(l.ranks()));
  for (const auto& t : p.teams()) teams.push_back(IntList(t.ranks()));
  for (const auto& s : p.shards()) {
    shards.push_back(
        absl::StrFormat(R"({"tensor":%d,"chunk":%d,"offset":%d,"count":%d,"server":%d})",
                        s.tensor(), s.chunk(), s.offset(), s.count(), s.server()));
  }
  // The live slots held by a process that joined the running job (the rest hold their first).
  for (const auto& w : p.incarnations()) {
    workers.push_back(absl::StrFormat(R"({"rank":%d,"joined_epoch":%d})", w.rank(), w.epoch()));
  }
  return absl::StrFormat(
      R"({"job":%s,"epoch":%d,"epoch_start_iteration":%d,"iteration":%d,"mode":%s,)"
      R"("topology":%s,"seed":%d,"world_size":%d,"ranks":%s,"ring":%s,"peers":[%s],)"
      R"("teams":[%s],"shards":[%s],"incarnations":[%s],"next_switch_iteration":%d,)"
      R"("next_mode":%s})",
      Quote(p.job()), p.epoch(), p.epoch_start_iteration(), p.iteration(), Quote(p.mode().mode()),
      Quote(p.mode().topology()), p.seed(), p.world_size(), IntList(p.ranks()), IntList(p.ring()),
      absl::StrJoin(peers, ","), absl::StrJoin(teams, ","), absl::StrJoin(shards, ","),
      absl::StrJoin(workers, ","), p.next_switch_iteration(), Quote(p.next_mode().mode()));
}

void PrintPlan(const Plan& p) {
  std::printf("job %s  iteration %lld  epoch %llu (from iteration %lld)\n",
              Printable(p.job()).c_str(), static_cast<long long>(p.iteration()),
              static_cast<unsigned long long>(p.epoch()),
              static_cast<long long>(p.epoch_start_iteration()));
  std::printf("mode  %s\n", ModeText(p.mode()).c_str());
  std::printf("ranks %s of %d\n", absl::StrJoin(p.ranks(), " ").c_str(), p.world_size());
  std::printf("ring  %s\n", absl::StrJoin(p.ring(), " -> ").c_str());
  const plan::ModeInfo* mode = plan::FindMode(p.mode().mode());
  if (mode != nullptr && mode->plan_carries == plan::PlanCarries::kPeers) {
    std::printf("peers\n");
    for (int r = 0; r < p.peers_size(); ++r) {
      std::printf(
          "  rank %d: %s\n", r,
          p.peers(r).ranks().empty() ? "-" : absl::StrJoin(p.peers(r).ranks(), ", ").c_str());
    }
  }
  for (int t = 0; t < p.teams_size(); ++t) {
    std::printf("team %d: %s\n", t, absl::StrJoin(p.teams(t).ranks(), " ").c_str());
  }
  if (!p.shards().empty()) {
    std::map<int, std::pair<int, int64_t>> per_server;  // chunks, elements
    for (const auto& s : p.shards()) {
      per_server[s.server()].first++;
      per_server[s.server()].second += s.count();
    }
    std::printf("shards (%d chunks)\n", p.shards_size());
    for (const auto& [server, n] : per_server) {
      std::printf("  server %d: %d chunks, %lld elements\n", server, n.first,
                  static_cast<long long>(n.second));
    }
  }
  if (p.next_switch_iteration() >= 0) {
    std::printf("next  %s from iteration %lld\n", ModeText(p.next_mode()).c_str(),
                static_cast<long long>(p.next_switch_iteration()));
  }
  if (scheduler::IsTerminal(p.job_state())) {
    std::printf("the job has ended: %s%s\n",
                std::string(scheduler::JobStateName(p.job_state())).c_str(),
                p.end_reason().empty() ? "" : (" (" + Printable(p.end_reason()) + ")").c_str());
  }
}

// The checkpoint lines of `herd job status`: where the job resumed from, the one being taken,
// the newest committed, the newest aborted and why.
void PrintCheckpoints(const JobStatus& j) {
  const auto& policy = j.spec().checkpoint();
  if (!policy.dir().empty()) {
    std::string every = policy.every_iterations() > 0
                            ? absl::StrFormat("every %d iterations", policy.every_iterations())
                        : policy.every_ms() > 0
                            ? absl::StrFormat("every %g s", policy.every_ms() / 1e3)
                            : std::string("on request");
    std::printf("checkpoints into %s, %s, keep_last %d, keep_every %d; %lld committed\n",
                Printable(policy.dir()).c_str(), every.c_str(), policy.keep_last(),
                policy.keep_every(), static_cast<long long>(j.checkpoints_committed()));
  }
  if (j.has_resumed()) {
    std::printf("resumed   from %s at iteration %lld (taken in %s with %d workers, %d shards)\n",
                Printable(j.resumed().path()).c_str(),
                static_cast<long long>(j.resumed().iteration()),
                Printable(j.resumed().mode()).c_str(), j.resumed().workers(), j.resumed().shards());
    for (const auto& why : j.resumed().skipped())
      std::printf("  skipped %s\n", Printable(why).c_str());
  }
  if (!j.pending_checkpoint().id().empty()) {
    const auto& c = j.pending_checkpoint();
    std::printf("checkpoint %s at iteration %lld being taken (%s): %d of %d processes reported\n",
                Printable(c.id()).c_str(), static_cast<long long>(c.iteration()),
                Printable(c.trigger()).c_str(), c.files_size(), c.expected_size());
  }
  if (!j.last_checkpoint().id().empty()) {
    const auto& c = j.last_checkpoint();
    std::printf("last checkpoint %s/%s (iteration %lld, %lld bytes, %s)\n",
                Printable(c.dir()).c_str(), Printable(c.id()).c_str(),
                static_cast<long long>(c.iteration()), static_cast<long long>(c.bytes()),
                Printable(c.trigger()).c_str());
  }
  if (!j.failed_checkpoint().id().empty()) {
    const auto& c = j.failed_checkpoint();
    std::printf("failed checkpoint %s (iteration %lld): %s\n", Printable(c.id()).c_str(),
                static_cast<long long>(c.iteration()), Printable(c.error()).c_str());
  }
  if (j.state() == herd::v1::JOB_PREEMPTED) {
    std::printf("preempted %s\n", Printable(j.preempt_reason()).c_str());
  }
  if (!j.result().params_digest().empty()) {
    std::printf("params digest %s (rank 0's final parameters)\n",
                Printable(j.result().params_digest()).c_str());
  }
}

// The elastic lines of `herd job status`: the bounds, the failures so far, a pause, and each
// membership event (when it was detected, where the survivors went on, how many iterations they
// ran again, and how long until every live worker had completed an iteration after it).
void PrintMembership(const JobStatus& j) {
  if (!j.spec().has_elastic()) return;
  const auto& e = j.spec().elastic();
  std::printf("elastic   %d..%d workers, %d of at most %d failures, pending timeout %g s\n",
              e.min_workers(), e.max_workers(), j.worker_failures(), e.max_failures(),
              static_cast<double>(e.pending_timeout_ms()) / 1e3);
  if (j.paused_since_unix_ms() != 0) {
    std::printf("paused    %s\n", Printable(j.pause_reason()).c_str());
  }
  for (const auto& ev : j.membership_events()) {
    // A join's time from its registration to the first iteration every live worker completed
    // with it is the rejoin time (the newcomer's start, the new communicator, the state sent).
    const double took = static_cast<double>(ev.resumed_unix_ms() - ev.detected_unix_ms()) / 1e3;
    std::string resumed = "not gone on yet";
    if (ev.resumed_unix_ms() > 0) {
      resumed = ev.joined()
                    ? absl::StrFormat("went on %.2f s after it registered (rejoin time)", took)
                    : absl::StrFormat("went on %.2f s after detection", took);
    }
    std::printf(
        "membership %s: %s; %d workers from iteration %lld (%lld iteration(s) run again), "
        "%s\n",
        absl::FormatTime("%Y-%m-%d %H:%M:%E3S UTC", absl::FromUnixMillis(ev.detected_unix_ms()),
                         absl::UTCTimeZone())
            .c_str(),
        Printable(ev.what()).c_str(), ev.workers_after(),
        static_cast<long long>(ev.rerun_from_iteration()),
        static_cast<long long>(ev.iterations_rerun()), resumed.c_str());
  }
}

void PrintStatus(const JobStatus& j) {
  const auto& s = j.spec();
  std::printf("job       %s\n", Printable(s.name()).c_str());
  std::printf("state     %s\n", std::string(scheduler::JobStateName(j.state())).c_str());
  if (!j.cancel_reason().empty())
    std::printf("reason    %s\n", Printable(j.cancel_reason()).c_str());
  if (j.state() == herd::v1::JOB_FAILED) {
    std::printf("failed    %s: %s\n", Printable(j.failed_process()).c_str(),
                Printable(j.failure_reason()).c_str());
  }
  if (j.state() == herd::v1::JOB_COMPLETED) {
    const auto& r = j.result();
    std::printf("result    %lld iterations, final loss %.4f, test accuracy %.4f, %.0f samples/s\n",
                static_cast<long long>(r.iterations()), r.final_loss(), r.test_accuracy(),
                r.samples_per_second());
    for (const auto& [name, value] : r.metrics()) {
      std::printf("metric    %s %g\n", Printable(name).c_str(), value);
    }
  }
  if (scheduler::IsTerminal(j.state())) {
    std::printf("wall time %.1f s from submission to the end\n", j.wall_seconds());
  }
  std::printf(
      "epoch     %llu from iteration %lld: %s\n", static_cast<unsigned long long>(j.epoch()),
      static_cast<long long>(j.epoch_start_iteration()), Printable(j.epoch_reason()).c_str());
  for (const auto& sw : j.schedule()) {
    std::printf("mode      %s from iteration %lld\n", ModeText(sw.mode()).c_str(),
                static_cast<long long>(sw.from_iteration()));
  }
  std::printf("completed iteration %lld\n", static_cast<long long>(j.completed_iteration()));
  std::printf("tensors   %d, seed %llu, optimizer %s lr %g\n", s.tensors_size(),
              static_cast<unsigned long long>(s.seed()), s.optimizer().name().c_str(),
              s.optimizer().learning_rate());
  auto table = [&](const char* title, const auto& members, bool progress) {
    std::printf("%s (%d)\n", title, members.size());
    for (const auto& m : members) {
      std::string state = m.name().empty() ? "empty"
                          : m.finished()   ? "done"
                                           : (m.alive() ? "alive" : "dead");
      std::string extra;
      if (progress && m.rank() < j.progress_size() && j.progress(m.rank()).iteration() >= 0) {
        const auto& p = j.progress(m.rank());
        extra = absl::StrFormat("  iteration %d loss %g", p.iteration(), p.stats().loss());
      }
      std::printf("  %3d  %-6s %-20s %s%s\n", m.rank(), state.c_str(), Printable(m.name()).c_str(),
                  Printable(m.address()).c_str(), extra.c_str());
    }
  };
  table("workers", j.workers(), true);
  if (j.servers_size() > 0) table("servers", j.servers(), false);
  PrintCheckpoints(j);
  PrintMembership(j);
}

class JobCommand : public Command {
 public:
  void Configure(CLI::App& app) override {
    app.require_subcommand(1);
    auto common = [&](CLI::App* sub) {
      sub->add_option("--scheduler", client_.address,
                      "host:port of the scheduler (default: $HERD_SCHEDULER or 127.0.0.1:7070)");
      sub->add_option("--token-file", token_file_, "File holding the scheduler's bearer token");
      sub->add_flag("--tls", client_.tls, "Connect with TLS");
      sub->add_option("--tls-ca", client_.tls_ca_file,
                      "PEM roots that sign the scheduler's certificate (implies --tls)");
      return sub;
    };
    validate_ = app.add_subcommand(
        "validate", "Check a YAML JobSpec file offline with the scheduler's own rules");
    validate_->add_option("FILE", file_, "the YAML JobSpec (format: docs/scheduler.md)")
        ->required();
    validate_->add_flag("--json", json_,
                        "Print the spec as the scheduler would store it (defaults filled in)");
    submit_ = common(app.add_subcommand("submit", "Submit a job from a YAML JobSpec file"));
    submit_->add_option("FILE", file_, "the YAML JobSpec (format: docs/scheduler.md)")->required();
    submit_->add_option("--resume", resume_,
                        "Resume from a checkpoint: DIR (its newest good one) or DIR/ID");
    checkpoint_ = common(app.add_subcommand(
        "checkpoint", "Checkpoint a job at the first iteration no worker has begun"));
    checkpoint_->add_option("NAME", name_, "job name")->required();
    checkpoint_->add_option("--dir", dir_, "Checkpoint directory (default: the JobSpec's)");
    checkpoint_->add_flag("--wait", wait_, "Wait until it is committed (or aborted)");
    checkpoint_->add_option("--wait-timeout", wait_timeout_s_, "Seconds --wait waits at most")
        ->check(CLI::Range(1, 86400));
    status_ = common(app.add_subcommand("status", "Show a job: state, epoch, mode, processes"));
    status_->add_option("NAME", name_, "job name")->required();
    status_->add_flag("--json", json_, "Print the JobStatus message as JSON");
    list_ = common(app.add_subcommand("list", "List the jobs"));
    set_mode_ = common(app.add_subcommand(
        "set-mode", "Switch a job's mode at an iteration boundary no worker has begun"));
    set_mode_->add_option("NAME", name_, "job name")->required();
    set_mode_->add_option("MODE", mode_, "the new mode: " + plan::ModeNameList())->required();
    set_mode_->add_option("--from-iteration", from_iteration_,
                          "First iteration of the new mode (default: the next one not begun)");
    mode_options_.Configure(*set_mode_);
    plan_ = common(app.add_subcommand("plan", "Print the plan of one iteration"));
    plan_->add_option("NAME", name_, "job name")->required();
    plan_->add_option("--iteration", iteration_, "the iteration")->required();
    plan_->add_flag("--json", json_,
                    "One JSON object: epoch, iteration, mode, peers (indexed by rank), ring, "
                    "teams, shards");
    cancel_ = common(app.add_subcommand("cancel", "Cancel a job (its processes hear it and exit)"));
    cancel_->add_option("NAME", name_, "job name")->required();
    cancel_->add_option("--reason", reason_, "Recorded in the job's status");
    delete_ = common(app.add_subcommand(
        "delete", "Forget a job that has ended (completed, failed, cancelled): its name is free"));
    delete_->add_option("NAME", name_, "job name")->required();
  }

  int Run() override {
    if (validate_->parsed()) return ValidateFile(file_);
    if (client_.address.empty()) client_.address = "127.0.0.1:7070";
    if (!client_.tls_ca_file.empty()) client_.tls = true;
    if (!token_file_.empty()) {
      auto token = rpc::ReadTokenFile(token_file_);
      if (!token.ok()) return Fail(token.status());
      client_.token = *token;
    }
    auto client = scheduler::SchedulerClient::Connect(client_);
    if (!client.ok()) return Fail(client.status());
    scheduler::SchedulerClient& c = **client;

    if (submit_->parsed()) {
      auto spec = LoadValidSpec(file_);
      if (!spec.ok()) return FailUsage(spec.status());
      if (!resume_.empty()) spec->set_resume_from(resume_);
      auto job = c.SubmitJob(*spec);
      if (!job.ok()) return Fail(job.status());
      std::printf("submitted job %s: %s, %d workers, %d servers, %d tensors (epoch %llu)\n",
                  job->spec().name().c_str(), ModeText(job->spec().mode()).c_str(),
                  job->spec().workers(), job->spec().servers(), job->spec().tensors_size(),
                  static_cast<unsigned long long>(job->epoch()));
      if (job->has_resumed()) {
        std::printf("resuming from %s at iteration %lld\n", job->resumed().path().c_str(),
                    static_cast<long long>(job->resumed().iteration()));
        for (const auto& why : job->resumed().skipped()) {
          std::printf("skipped %s\n", why.c_str());
        }
      }
      return kExitOk;
    }
    if (checkpoint_->parsed()) return Checkpoint(c);
    if (status_->parsed()) {
      auto job = c.GetJob(name_);
      if (!job.ok()) return Fail(job.status());
      if (json_) {
        std::string out;
        google::protobuf::util::JsonPrintOptions opts;
        opts.always_print_primitive_fields = true;
        (void)google::protobuf::util::MessageToJsonString(*job, &out, opts);
        std::printf("%s\n", out.c_str());
      } else {
        PrintStatus(*job);
      }
      return kExitOk;
    }
    if (list_->parsed()) {
      auto jobs = c.ListJobs();
      if (!jobs.ok()) return Fail(jobs.status());
      std::printf("%-20s %-10s %-28s %7s %7s %6s %9s\n", "NAME", "STATE", "MODE", "WORKERS",
                  "SERVERS", "EPOCH", "COMPLETED");
      for (const auto& j : jobs->jobs()) {
        int alive = 0;
        for (const auto& m : j.workers()) alive += m.alive();
        const auto& mode =
            j.schedule().empty() ? j.spec().mode() : j.schedule(j.schedule_size() - 1).mode();
        std::printf("%-20s %-10s %-28s %3d/%-3d %7d %6llu %9lld\n", j.spec().name().c_str(),
                    std::string(scheduler::JobStateName(j.state())).c_str(), ModeText(mode).c_str(),
                    alive, j.workers_size(), j.spec().servers(),
                    static_cast<unsigned long long>(j.epoch()),
                    static_cast<long long>(j.completed_iteration()));
      }
      return kExitOk;
    }
    if (set_mode_->parsed()) {
      herd::v1::SetModeRequest req;
      req.set_job(name_);
      auto* m = req.mutable_mode();
      m->set_mode(mode_);
      // The scheduler refuses a parameter that does not apply (with the rule's own message).
      mode_options_.SetAllGiven(m);
      if (set_mode_->count("--from-iteration") > 0) req.set_from_iteration(from_iteration_);
      auto job = c.SetMode(req);
      if (!job.ok()) return Fail(job.status());
      const auto& last = job->schedule(job->schedule_size() - 1);
      std::printf("job %s switches to %s from iteration %lld (epoch %llu)\n", name_.c_str(),
                  ModeText(last.mode()).c_str(), static_cast<long long>(last.from_iteration()),
                  static_cast<unsigned long long>(job->epoch()));
      return kExitOk;
    }
    if (plan_->parsed()) {
      herd::v1::GetPlanRequest req;
      req.set_job(name_);
      req.set_iteration(iteration_);
      auto plan = c.GetPlan(req);
      if (!plan.ok()) return Fail(plan.status());
      if (json_) {
        std::printf("%s\n", PlanJson(*plan).c_str());
      } else {
        PrintPlan(*plan);
      }
      return kExitOk;
    }
    if (delete_->parsed()) {
      if (auto st = c.DeleteJob(name_); !st.ok()) return Fail(st);
      std::printf("deleted job %s\n", name_.c_str());
      return kExitOk;
    }
    if (cancel_->parsed()) {
      auto job = c.CancelJob(name_, reason_);
      if (!job.ok()) return Fail(job.status());
      std::printf("cancelled job %s (epoch %llu)\n", name_.c_str(),
                  static_cast<unsigned long long>(job->epoch()));
      return kExitOk;
    }
    return kExitUsage;
  }

 private:
  static int Fail(const absl::Status& st) {
    std::fprintf(stderr, "herd job: %s: %s\n", absl::StatusCodeToString(st.code()).c_str(),
                 std::string(st.message()).c_str());
    return kExitFailure;
  }
  static int FailUsage(const absl::Status& st) {
    Fail(st);
    return kExitUsage;
  }

  // The file read and checked with the scheduler's own rules, offline; the spec as read (the
  // scheduler fills in the defaults itself). A later scheduler-side refusal is still possible.
  static absl::StatusOr<herd::v1::JobSpec> LoadValidSpec(const std::string& file) {
    auto spec = LoadOneJobSpecFile(file);
    if (!spec.ok()) return spec.status();
    auto normalized = scheduler::NormalizeJobSpec(*spec);
    if (!normalized.ok()) return normalized.status();
    return *spec;
  }

  // `herd job validate FILE [--json]`: the YAML reader and the scheduler's NormalizeJobSpec,
  // with no scheduler. What needs the scheduler's disk or its other jobs (a resume_from
  // checkpoint, a name already taken, the quotas of held jobs) is checked at submission only.
  // A spec that fails is a configuration error (exit 2): submitting it again cannot succeed.
  int ValidateFile(const std::string& file) {
    auto spec = LoadOneJobSpecFile(file);
    if (!spec.ok()) return FailUsage(spec.status());
    auto normalized = scheduler::NormalizeJobSpec(*spec);
    if (!normalized.ok()) return FailUsage(normalized.status());
    if (json_) {
      std::string out;
      google::protobuf::util::JsonPrintOptions opts;
      opts.always_print_primitive_fields = true;
      (void)google::protobuf::util::MessageToJsonString(*normalized, &out, opts);
      std::printf("%s\n", out.c_str());
      return kExitOk;
    }
    std::printf("%s: job %s is valid: %s, %d workers, %d servers, %d tensors\n", file.c_str(),
                normalized->name().c_str(), ModeText(normalized->mode()).c_str(),
                normalized->workers(), normalized->servers(), normalized->tensors_size());
    return kExitOk;
  }

  // `herd job checkpoint NAME [--wait]`: exit 0 once requested (with --wait: once committed).
  int Checkpoint(scheduler::SchedulerClient& c) {
    herd::v1::RequestCheckpointRequest req;
    req.set_job(name_);
    req.set_dir(dir_);
    auto record = c.RequestCheckpoint(req);
    if (!record.ok()) return Fail(record.status());
    std::printf("job %s: checkpoint %s at iteration %lld into %s\n", name_.c_str(),
                record->id().c_str(), static_cast<long long>(record->iteration()),
                record->dir().c_str());
    if (!wait_) return kExitOk;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(wait_timeout_s_);
    for (;;) {
      auto job = c.GetJob(name_);
      if (!job.ok()) return Fail(job.status());
      if (job->last_checkpoint().id() == record->id()) {
        std::printf("committed %s/%s (%lld bytes)\n", job->last_checkpoint().dir().c_str(),
                    record->id().c_str(), static_cast<long long>(job->last_checkpoint().bytes()));
        return kExitOk;
      }
      if (job->failed_checkpoint().id() == record->id()) {
        return Fail(absl::AbortedError(absl::StrFormat(
            "checkpoint %s was aborted: %s", record->id(), job->failed_checkpoint().error())));
      }
      if (scheduler::IsTerminal(job->state()) && job->pending_checkpoint().id() != record->id()) {
        return Fail(absl::FailedPreconditionError(
            absl::StrFormat("job %s ended (%s) before checkpoint %s committed", name_,
                            scheduler::JobStateName(job->state()), record->id())));
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        return Fail(absl::DeadlineExceededError(absl::StrFormat(
            "checkpoint %s did not commit within %d s", record->id(), wait_timeout_s_)));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  scheduler::ClientOptions client_;
  std::string token_file_;
  CLI::App* checkpoint_ = nullptr;
  std::string resume_, dir_;
  bool wait_ = false;
  int wait_timeout_s_ = 600;
  CLI::App *validate_ = nullptr, *submit_ = nullptr, *status_ = nullptr, *list_ = nullptr,
           *set_mode_ = nullptr, *plan_ = nullptr, *cancel_ = nullptr, *delete_ = nullptr;
  std::string file_, name_, reason_;
  std::string mode_;
  ModeOptions mode_options_;
  int64_t from_iteration_ = 0;
  int64_t iteration_ = 0;
  bool json_ = false;
};

HERD_REGISTER_COMMAND(JobCommand, "job", 20,
                      "Client of the scheduler: submit, status, list, set-mode, plan, checkpoint, "
                      "cancel, delete; validate a JobSpec offline");

}  // namespace
}  // namespace herd::cli
