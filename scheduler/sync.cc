// SchedulerCore: plans, iteration progress, barriers and the bootstrap store — the calls a
// running job makes every iteration or epoch.

#include <algorithm>
#include <chrono>
#include <future>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "common/unix_time.h"
#include "scheduler/bounds.h"
#include "scheduler/client/epoch_plan.h"
#include "scheduler/elastic.h"
#include "scheduler/job_metrics.h"
#include "scheduler/limits.h"
#include "scheduler/plan_builder.h"
#include "scheduler/scheduler_core.h"

namespace herd::scheduler {
namespace {

using limits::kMaxKeyBytes;

absl::Status ShuttingDown(std::string_view action) {
  return absl::UnavailableError(absl::StrFormat(
      "cannot %s: the scheduler is shutting down; retry against its successor", action));
}

}  // namespace

absl::StatusOr<herd::v1::Plan> SchedulerCore::GetPlan(const herd::v1::GetPlanRequest& req) {
  std::lock_guard<std::mutex> lock(mu_);
  HERD_RETURN_IF_ERROR(HearWitness(req.seen_state_seq(), req.job(), req.node_id()));
  if (req.iteration() < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("iteration must be >= 0, got %d", req.iteration()));
  }
  HERD_ASSIGN_OR_RETURN(Job * job, FindJob(req.job()));
  // A job that ended answers with its last plan, which says so (job_state, end_reason): the
  // process asking learns it must stop.
  if (IsTerminal(job->status.state())) {
    return BuildPlan(job->status, job->status.epoch_start_iteration());
  }
  HERD_RETURN_IF_ERROR(CheckEpoch(*job, req.epoch(), "plan an iteration"));
  // An iteration before an epoch that begins after the horizon (a worker joins there) is still
  // the previous epoch's, as the view a following worker holds says.
  if (const auto& prev = job->previous_view;
      req.iteration() < job->status.epoch_start_iteration() && prev.has_value() &&
      req.iteration() > job->status.completed_iteration() &&
      req.iteration() >= prev->epoch_start_iteration()) {
    return BuildPlan(job->status.spec(), *prev, req.iteration());
  }
  if (req.iteration() < job->status.epoch_start_iteration()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "iteration %d of job '%s' is before the current epoch %d, which begins at iteration %d "
        "(%s); plans of earlier epochs are no longer served",
        req.iteration(), req.job(), job->status.epoch(), job->status.epoch_start_iteration(),
        job->status.epoch_reason()));
  }
  if (req.node_id() != 0) {
    NodeRef ref;
    HERD_ASSIGN_OR_RETURN(herd::v1::Member * m,
                          FindLiveMember(*job, req.node_id(), "plan an iteration", &ref));
    // A worker asks for the plan of an iteration it is about to begin: one far past the job's
    // progress would move the horizon (every later change of plan) out of reach.
    const int64_t far =
        std::max(job->status.completed_iteration(), job->status.issued_iteration()) + 1 +
        limits::kMaxIterationsAhead;
    if (ref.role == herd::v1::ROLE_WORKER && req.iteration() > far) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s asks for the plan of iteration %d of job '%s', more than %d iterations ahead of "
          "the job (iteration %d); the job is unchanged",
          DescribeMember(ref.role, *m), req.iteration(), req.job(), limits::kMaxIterationsAhead,
          job->status.completed_iteration()));
    }
    // The plan after a job's last iteration is the final checkpoint's cut: every worker ran the
    // same count (DeclareModel checks it), so none begins that iteration, and the cut holds even
    // when the horizon granted past it (a script that declared its end only at the end).
    const int64_t planned = job->status.planned_iterations();
    const bool final_cut = ref.role == herd::v1::ROLE_WORKER && planned > 0 &&
                           req.iteration() == planned &&
                           job->status.state() == herd::v1::JOB_RUNNING &&
                           job->status.pending_checkpoint().id().empty() &&
                           job->status.last_checkpoint().iteration() != planned &&
                           PolicyWantsCheckpoint(job->status, planned);
    // A worker fetching the plan of an iteration begins it: a mode switch must come later.
    if (ref.role == herd::v1::ROLE_WORKER && req.iteration() != planned) {
      job->status.set_begun_iteration(std::max(job->status.begun_iteration(), req.iteration()));
    }
    if (final_cut && req.iteration() <= job->status.issued_iteration()) {
      herd::v1::JobStatus next = job->status;
      HERD_RETURN_IF_ERROR(StartCheckpoint(*job, next, planned, next.spec().checkpoint().dir(),
                                           "final", /*preempt=*/false));
      HERD_RETURN_IF_ERROR(Commit(*job, std::move(next), next_node_id_, /*sync=*/true));
    } else if (ref.role == herd::v1::ROLE_WORKER &&
               req.iteration() > job->status.issued_iteration()) {
      herd::v1::JobStatus next = job->status;
      next.set_issued_iteration(req.iteration());
      // No worker has begun this iteration yet, so it can be the cut of a checkpoint the
      // JobSpec's policy asks for; its plan (this one) names it.
      bool sync = false;
      if (job->status.state() == herd::v1::JOB_RUNNING &&
          PolicyWantsCheckpoint(job->status, req.iteration())) {
        const bool final = req.iteration() == job->status.planned_iterations();
        HERD_RETURN_IF_ERROR(StartCheckpoint(*job, next, req.iteration(),
                                             next.spec().checkpoint().dir(),
                                             final ? "final" : "policy", /*preempt=*/false));
        sync = true;
      }
      HERD_RETURN_IF_ERROR(Commit(*job, std::move(next), next_node_id_, sync));
    }
  }
  return BuildPlan(job->status, req.iteration());
}

absl::StatusOr<std::optional<herd::v1::Plan>> SchedulerCore::WaitForEpoch(std::string_view name,
                                                                          uint64_t after_epoch,
                                                                          Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (shutdown_) return ShuttingDown("watch the plan");
    if (!refusal_.ok()) return refusal_;
    // Looked up again after every wait: the job may have been deleted meanwhile.
    HERD_ASSIGN_OR_RETURN(Job * job, FindJob(name));
    const auto& s = job->status;
    if (s.epoch() > after_epoch) return BuildPlan(s, s.epoch_start_iteration());
    if (deadline.expired()) return std::optional<herd::v1::Plan>();
    WaitChanged(lock, deadline);
  }
}

absl::StatusOr<herd::v1::BarrierResponse> SchedulerCore::Barrier(
    const herd::v1::BarrierRequest& req, Deadline deadline) {
  std::promise<absl::StatusOr<herd::v1::BarrierResponse>> answer;
  auto got = answer.get_future();
  BarrierAsync(req, deadline, [&answer](absl::StatusOr<herd::v1::BarrierResponse> r) {
    answer.set_value(std::move(r));
  });
  return got.get();
}

void SchedulerCore::BarrierAsync(const herd::v1::BarrierRequest& req, Deadline deadline,
                                 BarrierDone done) {
  std::lock_guard<std::mutex> lock(mu_);
  auto fail = [&](absl::Status st) { Complete([done, st] { done(st); }); };
  if (shutdown_) return fail(ShuttingDown("wait at a barrier"));
  if (!refusal_.ok()) return fail(refusal_);
  if (auto st = CheckText("the barrier name", req.name(), kMaxKeyBytes); !st.ok()) return fail(st);
  auto found = FindActiveJob(req.job(), "enter a barrier");
  if (!found.ok()) return fail(found.status());
  Job* job = *found;
  NodeRef ref;
  auto me = FindLiveMember(*job, req.node_id(), "enter a barrier", &ref);
  if (!me.ok()) return fail(me.status());
  if (auto st = CheckEpoch(*job, req.epoch(), "enter a barrier"); !st.ok()) return fail(st);
  // Workers and servers synchronise separately: a barrier waits for the live processes of the
  // caller's role.
  const bool worker = ref.role == herd::v1::ROLE_WORKER;
  const std::string key = absl::StrFormat("%s/%s", worker ? "worker" : "server", req.name());
  int expected = 0;
  for (const auto& m : worker ? job->status.workers() : job->status.servers()) {
    expected += m.alive() ? 1 : 0;
  }
  BarrierState& b = job->barriers[key];
  b.arrived.insert(req.node_id());
  herd::v1::BarrierResponse resp;
  resp.set_epoch(job->status.epoch());
  resp.set_arrived(expected);
  if (static_cast<int>(b.arrived.size()) >= expected) {
    // The last one: everyone waiting at this name goes on.
    b.arrived.clear();
    ++b.generation;
    auto& waiters = job->barrier_waiters;
    for (auto it = waiters.begin(); it != waiters.end();) {
      if (it->key != key) {
        ++it;
        continue;
      }
      Complete([d = std::move(it->done), resp] { d(resp); });
      it = waiters.erase(it);
    }
    Complete([done, resp] { done(resp); });
    changed_.notify_all();
    return;
  }
  if (deadline.expired()) {
    b.arrived.erase(req.node_id());
    return fail(absl::DeadlineExceededError(
        absl::StrFormat("barrier '%s' of job '%s': %s gave up waiting at once (no time left)",
                        req.name(), req.job(), DescribeMember(ref.role, **me))));
  }
  BarrierWaiter w;
  w.key = key;
  w.name = req.name();
  w.node_id = req.node_id();
  w.generation = b.generation;
  w.epoch = job->status.epoch();
  w.role = ref.role;
  w.who = DescribeMember(ref.role, **me);
  w.deadline = deadline;
  w.done = std::move(done);
  job->barrier_waiters.push_back(std::move(w));
}

absl::StatusOr<herd::v1::ReportIterationResponse> SchedulerCore::ReportIteration(
    const herd::v1::ReportIterationRequest& req) {
  std::lock_guard<std::mutex> lock(mu_);
  HERD_RETURN_IF_ERROR(HearWitness(req.seen_state_seq(), req.job(), req.node_id()));
  HERD_ASSIGN_OR_RETURN(Job * job, FindActiveJob(req.job(), "report an iteration"));
  NodeRef ref;
  HERD_ASSIGN_OR_RETURN(herd::v1::Member * me,
                        FindLiveMember(*job, req.node_id(), "report an iteration", &ref));
  if (ref.role != herd::v1::ROLE_WORKER) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s of job '%s' reports an iteration; only workers do",
                        DescribeMember(ref.role, *me), req.job()));
  }
  HERD_RETURN_IF_ERROR(CheckEpoch(*job, req.epoch(), "report an iteration"));
  if (req.iteration() < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s reports iteration %d of job '%s'; iterations are >= 0",
                        DescribeMember(ref.role, *me), req.iteration(), req.job()));
  }
  if (req.iteration() < job->status.epoch_start_iteration()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s reports iteration %d of job '%s', before the current epoch %d, which begins at "
        "iteration %d; fetch the new plan",
        DescribeMember(ref.role, *me), req.iteration(), req.job(), job->status.epoch(),
        job->status.epoch_start_iteration()));
  }
  // The legacy per-iteration report: the same in-memory progress as a Follow stream's.
  herd::v1::IterationReport one;
  one.set_iteration(req.iteration());
  *one.mutable_stats() = req.stats();
  google::protobuf::RepeatedPtrField<herd::v1::IterationReport> its;
  *its.Add() = std::move(one);
  HERD_RETURN_IF_ERROR(TakeProgress(*job, ref.slot, req.iteration(), its));
  FoldProgress(*job, Clock::now(), /*save=*/false);
  herd::v1::ReportIterationResponse resp;
  resp.set_epoch(job->status.epoch());
  resp.set_completed_iteration(job->status.completed_iteration());
  resp.set_state_seq(db_->sequence().current());
  return resp;
}

absl::Status SchedulerCore::StoreSet(std::string_view name, std::string_view key,
                                     std::string_view value) {
  HERD_RETURN_IF_ERROR(CheckText("the store key", key, kMaxKeyBytes));
  if (value.size() > limits::kMaxStoreValueBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("store key '%s': the value has %d bytes, more than the limit of %d", key,
                        value.size(), limits::kMaxStoreValueBytes));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!refusal_.ok()) return refusal_;
  HERD_ASSIGN_OR_RETURN(Job * job, FindActiveJob(name, "set a store key"));
  if (job->kv.contains(std::string(key))) {
    return absl::AlreadyExistsError(
        absl::StrFormat("store key '%s' of job '%s' is already set", key, name));
  }
  // Quotas: the store lives in memory and in RocksDB until the job ends.
  const size_t bytes = key.size() + value.size();
  if (job->kv.size() >= limits::kMaxStoreKeysPerJob ||
      job->kv_bytes + bytes > limits::kMaxStoreBytesPerJob) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the bootstrap store of job '%s' holds %d keys and %d bytes; key '%s' (%d bytes) would "
        "pass its limit of %d keys or %d bytes",
        name, job->kv.size(), job->kv_bytes, key, bytes, limits::kMaxStoreKeysPerJob,
        limits::kMaxStoreBytesPerJob));
  }
  if (store_bytes_ + bytes > limits::kMaxStoreBytesTotal) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the bootstrap stores of all jobs hold %d bytes; key '%s' of job '%s' (%d bytes) would "
        "pass the scheduler's limit of %d bytes (jobs that end free theirs)",
        store_bytes_, key, name, bytes, limits::kMaxStoreBytesTotal));
  }
  HERD_RETURN_IF_ERROR(db_->PutKv(name, key, value));
  job->kv.emplace(std::string(key), std::string(value));
  job->kv_bytes += bytes;
  store_bytes_ += bytes;
  auto [first, last] = job->store_waiters.equal_range(std::string(key));
  for (auto it = first; it != last; ++it) {
    Complete([d = std::move(it->second.done), v = std::string(value)] { d(v); });
  }
  job->store_waiters.erase(first, last);
  WakeManyWaiters(*job, std::string(key));
  changed_.notify_all();
  return absl::OkStatus();
}

absl::StatusOr<std::string> SchedulerCore::StoreGet(std::string_view name, std::string_view key,
                                                    Deadline deadline) {
  std::promise<absl::StatusOr<std::string>> answer;
  auto got = answer.get_future();
  StoreGetAsync(name, key, deadline,
                [&answer](absl::StatusOr<std::string> r) { answer.set_value(std::move(r)); });
  return got.get();
}

void SchedulerCore::StoreGetAsync(std::string_view name, std::string_view key, Deadline deadline,
                                  StoreDone done) {
  std::lock_guard<std::mutex> lock(mu_);
  auto answer = [&](absl::StatusOr<std::string> r) {
    Complete([done = std::move(done), r = std::move(r)] { done(r); });
  };
  if (shutdown_) return answer(ShuttingDown("read a store key"));
  if (!refusal_.ok()) return answer(refusal_);
  auto found = FindActiveJob(name, "read a store key");
  if (!found.ok()) return answer(found.status());
  Job* job = *found;
  if (auto it = job->kv.find(std::string(key)); it != job->kv.end()) return answer(it->second);
  if (deadline.expired()) {
    return answer(absl::DeadlineExceededError(
        absl::StrFormat("store key '%s' of job '%s' was not set before the deadline", key, name)));
  }
  job->store_waiters.emplace(std::string(key), StoreWaiter{deadline, std::move(done)});
}

void SchedulerCore::Complete(std::function<void()> done) {
  completions_.push_back(std::move(done));
  completions_cv_.notify_one();
}

void SchedulerCore::CompleterLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    completions_cv_.wait(lock, [&] { return completer_stop_ || !completions_.empty(); });
    if (completions_.empty()) return;  // stopping, and every answer given
    std::deque<std::function<void()>> batch;
    batch.swap(completions_);
    lock.unlock();
    for (auto& done : batch) done();
    lock.lock();
  }
}

void SchedulerCore::SettleWaits(Job& job) {
  const std::string& name = job.status.spec().name();
  const bool ended = IsTerminal(job.status.state());
  auto& waiters = job.barrier_waiters;
  for (auto it = waiters.begin(); it != waiters.end();) {
    absl::Status st;
    if (ended) {
      st = absl::FailedPreconditionError(
          absl::StrFormat("job '%s' ended (%s) while %s waited at barrier '%s'", name,
                          JobStateName(job.status.state()), it->who, it->name));
    } else if (job.status.epoch() != it->epoch) {
      // ABORTED, not UNAVAILABLE: a blind retry would enter the barrier of the new epoch.
      st = absl::AbortedError(absl::StrFormat(
          "job '%s' moved from epoch %d to %d while %s waited at barrier '%s' (%s); fetch the new "
          "plan and retry",
          name, it->epoch, job.status.epoch(), it->who, it->name, job.status.epoch_reason()));
    } else {
      ++it;
      continue;
    }
    Complete([d = std::move(it->done), st] { d(st); });
    it = waiters.erase(it);
  }
  if (ended) {
    for (auto& [key, w] : job.store_waiters) {
      Complete([d = std::move(w.done), name, key = key, state = job.status.state()] {
        d(absl::FailedPreconditionError(absl::StrFormat(
            "cannot read a store key: job '%s' has ended (%s) while store key '%s' was awaited",
            name, JobStateName(state), key)));
      });
    }
    job.store_waiters.clear();
    for (auto& [key, w] : job.many_waiters) {
      Complete([d = std::move(w->done), name, key = key, state = job.status.state()] {
        d(absl::FailedPreconditionError(absl::StrFormat(
            "cannot read store keys: job '%s' has ended (%s) while store key '%s' was awaited",
            name, JobStateName(state), key)));
      });
    }
    job.many_waiters.clear();
  }
}

void SchedulerCore::ExpireWaits(Clock::time_point) {
  for (auto& [name, job] : jobs_) {
    for (auto it = job.store_waiters.begin(); it != job.store_waiters.end();) {
      if (!it->second.deadline.expired()) {
        ++it;
        continue;
      }
      Complete([d = std::move(it->second.done), key = it->first, name = name] {
        d(absl::DeadlineExceededError(absl::StrFormat(
            "store key '%s' of job '%s' was not set before the deadline", key, name)));
      });
      it = job.store_waiters.erase(it);
    }
    for (auto it = job.many_waiters.begin(); it != job.many_waiters.end();) {
      if (!it->second->deadline.expired()) {
        ++it;
        continue;
      }
      auto r = GetManyAnswer(job, *it->second, true);
      Complete([d = std::move(it->second->done), r = std::move(*r)]() mutable { d(std::move(r)); });
      it = job.many_waiters.erase(it);
    }
    auto& waiters = job.barrier_waiters;
    for (auto it = waiters.begin(); it != waiters.end();) {
      if (!it->deadline.expired()) {
        ++it;
        continue;
      }
      BarrierState& now = job.barriers[it->key];
      std::vector<std::string> missing;
      for (const auto& m :
           it->role == herd::v1::ROLE_WORKER ? job.status.workers() : job.status.servers()) {
        if (m.alive() && !now.arrived.contains(m.node_id())) {
          missing.push_back(DescribeMember(it->role, m));
        }
      }
      now.arrived.erase(it->node_id);
      Complete([d = std::move(it->done),
                msg = absl::StrFormat("barrier '%s' of job '%s': %s gave up waiting for %s",
                                      it->name, name, it->who, absl::StrJoin(missing, ", "))] {
        d(absl::DeadlineExceededError(msg));
      });
      it = waiters.erase(it);
    }
  }
}

absl::StatusOr<herd::v1::StoreGetManyResponse> SchedulerCore::StoreGetMany(
    const herd::v1::StoreGetManyRequest& req, Deadline deadline) {
  std::promise<absl::StatusOr<herd::v1::StoreGetManyResponse>> answer;
  auto got = answer.get_future();
  StoreGetManyAsync(req, deadline, [&answer](absl::StatusOr<herd::v1::StoreGetManyResponse> r) {
    answer.set_value(std::move(r));
  });
  return got.get();
}

namespace {

absl::Status GetManyTooLarge(size_t upto, size_t n) {
  return absl::ResourceExhaustedError(absl::StrFormat(
      "the values of the first %d of the %d store keys asked for hold more than %d bytes, the "
      "most one answer carries; ask for fewer keys at a time",
      upto, n, limits::kMaxStoreGetManyAnswerBytes));
}

}  // namespace

std::optional<absl::StatusOr<herd::v1::StoreGetManyResponse>> SchedulerCore::GetManyAnswer(
    const Job& job, ManyWaiter& w, bool expired) {
  const auto& keys = w.req.keys();
  const size_t n = static_cast<size_t>(keys.size());
  // keys[0, found) were set at the last look (a key is written once, and the job's ending
  // answers every waiter), so each look starts past them.
  for (; w.found < n; ++w.found) {
    auto it = job.kv.find(keys[w.found]);
    if (it == job.kv.end()) break;
    w.bytes += it->second.size();
    if (w.bytes > limits::kMaxStoreGetManyAnswerBytes) return GetManyTooLarge(w.found + 1, n);
  }
  if (w.found < n && !expired) return std::nullopt;
  herd::v1::StoreGetManyResponse resp;
  std::vector<size_t> missing;
  size_t answered = 0;
  for (size_t i = 0; i < n; ++i) {
    auto it = job.kv.find(keys[i]);
    if (it == job.kv.end()) {
      missing.push_back(i);
      resp.add_values();
      continue;
    }
    answered += it->second.size();
    if (answered > limits::kMaxStoreGetManyAnswerBytes) return GetManyTooLarge(i + 1, n);
    resp.add_values(it->second);
  }
  if (missing.empty()) return resp;
  if (w.req.partial()) {
    for (size_t i : missing) resp.add_missing(static_cast<uint32_t>(i));
    return resp;
  }
  std::string named;
  for (size_t i = 0; i < missing.size() && i < 8; ++i) {
    absl::StrAppendFormat(&named, "%s'%s'", i == 0 ? "" : ", ", Echo(keys[missing[i]]));
  }
  if (missing.size() > 8) absl::StrAppendFormat(&named, " and %d more", missing.size() - 8);
  return absl::DeadlineExceededError(
      absl::StrFormat("store key%s %s (%d of %d) of job '%s' %s not set before the deadline",
                      missing.size() == 1 ? "" : "s", named, missing.size(), n, w.req.job(),
                      missing.size() == 1 ? "was" : "were"));
}

void SchedulerCore::StoreGetManyAsync(const herd::v1::StoreGetManyRequest& req, Deadline deadline,
                                      StoreManyDone done) {
  auto answer = [&](absl::StatusOr<herd::v1::StoreGetManyResponse> r) {
    Complete([done = std::move(done), r = std::move(r)]() mutable { done(std::move(r)); });
  };
  const auto& keys = req.keys();
  const size_t n = static_cast<size_t>(keys.size());
  std::lock_guard<std::mutex> lock(mu_);
  if (n == 0) return answer(absl::InvalidArgumentError("StoreGetMany names no key"));
  if (n > limits::kMaxStoreGetManyKeys) {
    return answer(absl::InvalidArgumentError(
        absl::StrFormat("StoreGetMany names %d keys, more than the limit of %d; ask in parts", n,
                        limits::kMaxStoreGetManyKeys)));
  }
  for (size_t i = 0; i < n; ++i) {
    if (auto st =
            CheckText(absl::StrFormat("store key %d of the request", i), keys[i], kMaxKeyBytes);
        !st.ok()) {
      return answer(st);
    }
  }
  if (shutdown_) return answer(ShuttingDown("read store keys"));
  if (!refusal_.ok()) return answer(refusal_);
  auto found = FindActiveJob(req.job(), "read store keys");
  if (!found.ok()) return answer(found.status());
  Job* job = *found;
  // Values already there that no answer could carry: refused now rather than after a wait.
  size_t present = 0;
  for (size_t i = 0; i < n; ++i) {
    auto it = job->kv.find(keys[i]);
    if (it != job->kv.end() &&
        (present += it->second.size()) > limits::kMaxStoreGetManyAnswerBytes) {
      return answer(GetManyTooLarge(i + 1, n));
    }
  }
  auto w = std::make_unique<ManyWaiter>();
  w->req = req;
  w->deadline = deadline;
  if (auto now = GetManyAnswer(*job, *w, deadline.expired())) return answer(std::move(*now));
  w->done = std::move(done);
  const std::string next = w->req.keys(static_cast<int>(w->found));
  job->many_waiters.emplace(next, std::move(w));
}

void SchedulerCore::WakeManyWaiters(Job& job, const std::string& key) {
  auto [first, last] = job.many_waiters.equal_range(key);
  std::vector<std::unique_ptr<ManyWaiter>> woken;
  for (auto it = first; it != last; ++it) woken.push_back(std::move(it->second));
  job.many_waiters.erase(first, last);
  for (auto& w : woken) {
    if (auto now = GetManyAnswer(job, *w, false)) {
      Complete([d = std::move(w->done), r = std::move(*now)]() mutable { d(std::move(r)); });
      continue;
    }
    // Waits now on its next missing key: each waiter is looked at once per key it names.
    const std::string next = w->req.keys(static_cast<int>(w->found));
    job.many_waiters.emplace(next, std::move(w));
  }
}

}  // namespace herd::scheduler
