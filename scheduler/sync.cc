// SchedulerCore: plans, iteration progress, barriers and the bootstrap store — the calls a
// running job makes every iteration or epoch.

#include <algorithm>
#include <chrono>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "scheduler/bounds.h"
#include "scheduler/elastic.h"
#include "scheduler/job_metrics.h"
#include "scheduler/limits.h"
#include "scheduler/plan_builder.h"
#include "scheduler/scheduler_core.h"

namespace herd::scheduler {
namespace {

using limits::kMaxKeyBytes;

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

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
    (void)m;
    // A worker fetching the plan of an iteration begins it: a mode switch must come later.
    if (ref.role == herd::v1::ROLE_WORKER && req.iteration() > job->status.issued_iteration()) {
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
  std::unique_lock<std::mutex> lock(mu_);
  if (!refusal_.ok()) return refusal_;
  HERD_RETURN_IF_ERROR(CheckText("the barrier name", req.name(), kMaxKeyBytes));
  HERD_ASSIGN_OR_RETURN(Job * job, FindActiveJob(req.job(), "enter a barrier"));
  NodeRef ref;
  HERD_ASSIGN_OR_RETURN(herd::v1::Member * me,
                        FindLiveMember(*job, req.node_id(), "enter a barrier", &ref));
  const std::string who = DescribeMember(ref.role, *me);
  HERD_RETURN_IF_ERROR(CheckEpoch(*job, req.epoch(), "enter a barrier"));
  // Workers and servers synchronise separately: a barrier waits for the live processes of the
  // caller's role.
  const bool worker = ref.role == herd::v1::ROLE_WORKER;
  const std::string key = absl::StrFormat("%s/%s", worker ? "worker" : "server", req.name());
  const uint64_t epoch = job->status.epoch();
  auto live = [&] {
    std::vector<const herd::v1::Member*> out;
    for (const auto& m : worker ? job->status.workers() : job->status.servers()) {
      if (m.alive()) out.push_back(&m);
    }
    return out;
  };
  BarrierState& b = job->barriers[key];
  const uint64_t generation = b.generation;
  b.arrived.insert(req.node_id());
  const int expected = static_cast<int>(live().size());
  if (static_cast<int>(b.arrived.size()) >= expected) {
    b.arrived.clear();
    ++b.generation;
    changed_.notify_all();
    herd::v1::BarrierResponse resp;
    resp.set_epoch(epoch);
    resp.set_arrived(expected);
    return resp;
  }
  while (true) {
    WaitChanged(lock, deadline);
    if (shutdown_) return ShuttingDown("wait at a barrier");
    if (!refusal_.ok()) return refusal_;
    // Looked up again after every wait: a job that ended may have been deleted meanwhile.
    HERD_ASSIGN_OR_RETURN(job, FindJob(req.job()));
    if (IsTerminal(job->status.state())) {
      return absl::FailedPreconditionError(
          absl::StrFormat("job '%s' ended (%s) while %s waited at barrier '%s'", req.job(),
                          JobStateName(job->status.state()), who, req.name()));
    }
    if (job->status.epoch() != epoch) {
      // ABORTED, not UNAVAILABLE: a blind retry would enter the barrier of the new epoch.
      return absl::AbortedError(absl::StrFormat(
          "job '%s' moved from epoch %d to %d while %s waited at barrier '%s' (%s); fetch the new "
          "plan and retry",
          req.job(), epoch, job->status.epoch(), who, req.name(), job->status.epoch_reason()));
    }
    BarrierState& now = job->barriers[key];
    if (now.generation != generation) {
      herd::v1::BarrierResponse resp;
      resp.set_epoch(epoch);
      resp.set_arrived(expected);
      return resp;
    }
    if (deadline.expired()) {
      std::vector<std::string> missing;
      for (const auto* m : live()) {
        if (!now.arrived.contains(m->node_id())) missing.push_back(DescribeMember(ref.role, *m));
      }
      now.arrived.erase(req.node_id());
      return absl::DeadlineExceededError(
          absl::StrFormat("barrier '%s' of job '%s': %s gave up waiting for %s", req.name(),
                          req.job(), who, absl::StrJoin(missing, ", ")));
    }
  }
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
  herd::v1::JobStatus next = job->status;
  auto* p = next.mutable_progress(ref.slot);
  p->set_iteration(req.iteration());
  *p->mutable_stats() = req.stats();
  next.set_issued_iteration(std::max(next.issued_iteration(), req.iteration()));
  int64_t low = INT64_MAX;
  for (const auto& q : next.progress()) {
    if (next.workers(q.rank()).alive()) low = std::min(low, q.iteration());
  }
  if (low != INT64_MAX) next.set_completed_iteration(std::max(next.completed_iteration(), low));
  NoteProgress(next, NowUnixMs());
  HERD_RETURN_IF_ERROR(Commit(*job, std::move(next), next_node_id_, /*sync=*/false));
  // Rank 0's figures are the job's (as in its result): its metrics and its history.
  if (job->status.progress(ref.slot).rank() == 0) {
    RecordRankZeroIteration(job->status, req.iteration(), req.stats(), *history_);
  }
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
  changed_.notify_all();
  return absl::OkStatus();
}

absl::StatusOr<std::string> SchedulerCore::StoreGet(std::string_view name, std::string_view key,
                                                    Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (shutdown_) return ShuttingDown("read a store key");
    if (!refusal_.ok()) return refusal_;
    HERD_ASSIGN_OR_RETURN(Job * job, FindActiveJob(name, "read a store key"));
    if (auto it = job->kv.find(std::string(key)); it != job->kv.end()) return it->second;
    if (deadline.expired()) {
      return absl::DeadlineExceededError(
          absl::StrFormat("store key '%s' of job '%s' was not set before the deadline", key, name));
    }
    WaitChanged(lock, deadline);
  }
}

absl::StatusOr<herd::v1::StoreGetManyResponse> SchedulerCore::StoreGetMany(
    const herd::v1::StoreGetManyRequest& req, Deadline deadline) {
  const auto& keys = req.keys();
  const size_t n = static_cast<size_t>(keys.size());
  if (n == 0) return absl::InvalidArgumentError("StoreGetMany names no key");
  if (n > limits::kMaxStoreGetManyKeys) {
    return absl::InvalidArgumentError(
        absl::StrFormat("StoreGetMany names %d keys, more than the limit of %d; ask in parts", n,
                        limits::kMaxStoreGetManyKeys));
  }
  for (size_t i = 0; i < n; ++i) {
    HERD_RETURN_IF_ERROR(
        CheckText(absl::StrFormat("store key %d of the request", i), keys[i], kMaxKeyBytes));
  }
  const std::string& name = req.job();
  auto too_large = [&](size_t upto) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the values of the first %d of the %d store keys asked for hold more than %d bytes, the "
        "most one answer carries; ask for fewer keys at a time",
        upto, n, limits::kMaxStoreGetManyAnswerBytes));
  };
  std::unique_lock<std::mutex> lock(mu_);
  // keys[0, found) were set at the last look (a key is written once; the job's ending drops
  // its store, which FindActiveJob notices), so each wake-up looks only past them.
  size_t found = 0, bytes = 0;
  for (bool first = true;; first = false) {
    if (shutdown_) return ShuttingDown("read store keys");
    if (!refusal_.ok()) return refusal_;
    HERD_ASSIGN_OR_RETURN(Job * job, FindActiveJob(name, "read store keys"));
    if (first) {
      // Values already there that no answer could carry: refused now rather than after a wait.
      size_t present = 0;
      for (size_t i = 0; i < n; ++i) {
        auto it = job->kv.find(keys[i]);
        if (it != job->kv.end() &&
            (present += it->second.size()) > limits::kMaxStoreGetManyAnswerBytes) {
          return too_large(i + 1);
        }
      }
    }
    for (; found < n; ++found) {
      auto it = job->kv.find(keys[found]);
      if (it == job->kv.end()) break;
      bytes += it->second.size();
      if (bytes > limits::kMaxStoreGetManyAnswerBytes) return too_large(found + 1);
    }
    const bool expired = deadline.expired();
    if (found == n || expired) {
      herd::v1::StoreGetManyResponse resp;
      std::vector<size_t> missing;
      size_t answered = 0;
      for (size_t i = 0; i < n; ++i) {
        auto it = job->kv.find(keys[i]);
        if (it == job->kv.end()) {
          missing.push_back(i);
          resp.add_values();
          continue;
        }
        answered += it->second.size();
        if (answered > limits::kMaxStoreGetManyAnswerBytes) return too_large(i + 1);
        resp.add_values(it->second);
      }
      if (missing.empty()) return resp;
      if (expired) {
        if (req.partial()) {
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
                            missing.size() == 1 ? "" : "s", named, missing.size(), n, name,
                            missing.size() == 1 ? "was" : "were"));
      }
      // Not there after all (the job's store was dropped and built again): look again.
      found = 0;
      bytes = 0;
      continue;
    }
    WaitChanged(lock, deadline);
  }
}

}  // namespace herd::scheduler
