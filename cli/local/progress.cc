#include "cli/local/progress.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "scheduler/client/job_states.h"

namespace herd::cli {
namespace {

using herd::v1::JobStatus;
using Seconds = std::chrono::duration<double>;

// While training, a log gets a line at most this often.
constexpr auto kLogInterval = std::chrono::seconds(5);

// "1 worker", "4 workers".
std::string Count(int n, std::string_view noun) {
  return absl::StrFormat("%d %s%s", n, noun, n == 1 ? "" : "s");
}

// "3 of 4 workers".
std::string CountOf(int n, int of, std::string_view noun) {
  return absl::StrFormat("%d of %s", n, Count(of, noun));
}

// The mode the job's schedule gives an iteration.
std::string ModeAt(const JobStatus& job, int64_t iteration) {
  std::string mode = job.spec().mode().mode();
  for (const auto& sw : job.schedule()) {
    if (sw.from_iteration() <= iteration) mode = sw.mode().mode();
  }
  return mode;
}

template <typename Members>
int Registered(const Members& members) {
  int n = 0;
  for (const auto& m : members) n += !m.name().empty() && (m.alive() || m.finished());
  return n;
}

// A worker whose progress counts: alive or finished (a dead one is the scheduler's business).
bool Counts(const JobStatus& job, int rank) {
  if (rank < 0 || rank >= job.workers_size()) return false;
  const auto& m = job.workers(rank);
  return m.alive() || m.finished();
}

// The last iteration every counting worker completed (-1: some has none yet, or none counts).
int64_t SlowestIteration(const JobStatus& job) {
  int64_t slowest = INT64_MAX;
  for (const auto& p : job.progress()) {
    if (Counts(job, p.rank())) slowest = std::min(slowest, p.iteration());
  }
  return slowest == INT64_MAX ? -1 : slowest;
}

}  // namespace

ProgressLine::ProgressLine(bool tty, std::FILE* out) : tty_(tty), out_(out) {}

std::string ProgressLine::TrainingLine(const JobStatus& job, Clock::time_point now) {
  const int64_t iteration = SlowestIteration(job);
  if (iteration < 0) return "";
  if (first_iteration_ < 0) {
    first_iteration_ = last_iteration_ = iteration;
    first_seen_ = last_advance_ = now;
  } else if (iteration > last_iteration_) {
    last_iteration_ = iteration;
    last_advance_ = now;
  }
  const double elapsed = Seconds(last_advance_ - first_seen_).count();

  // One iteration of the job is every counting worker's batch.
  double loss = 0, exposed = 0, busy = 0;
  int64_t global_batch = 0;
  int n = 0;
  for (const auto& p : job.progress()) {
    if (!Counts(job, p.rank())) continue;
    loss += p.stats().loss();
    exposed += p.stats().exposed_comm_seconds();
    busy += p.stats().iteration_seconds();
    global_batch += p.stats().samples();
    ++n;
  }
  if (global_batch == 0) {
    global_batch = static_cast<int64_t>(job.spec().training().batch_size()) * n;
  }
  // The rate seen advance, or, for a job at its end that was never seen to advance (workers
  // report their progress about once a second: a short job may end between two looks), the
  // rate of the reported iterations themselves.
  const bool at_end = scheduler::IsTerminal(job.state()) ||
                      (job.planned_iterations() > 0 && iteration >= job.planned_iterations() - 1);
  double rate = 0;
  if (last_iteration_ > first_iteration_ && elapsed > 0) {
    rate = static_cast<double>(last_iteration_ - first_iteration_) * global_batch / elapsed;
  } else if (at_end && busy > 0) {
    rate = static_cast<double>(global_batch) / (busy / n);
  } else {
    return "";  // no rate yet
  }
  std::string where = absl::StrFormat("iter %d", iteration + 1);
  const int64_t planned = job.planned_iterations();
  const int epochs = job.spec().training().epochs();
  if (planned > 0) {
    where = absl::StrFormat("iter %d/%d", iteration + 1, planned);
    if (epochs > 0 && planned >= epochs) {
      const int64_t per_epoch = planned / epochs;
      const int64_t epoch = std::min<int64_t>(iteration / per_epoch + 1, epochs);
      where = absl::StrFormat("epoch %d/%d  %s", epoch, epochs, where);
    }
  }
  // A training program that does not report its loss (the Python front end's step() without
  // loss=) reports NaN: the line leaves the loss out.
  const std::string loss_part = std::isnan(loss) ? "" : absl::StrFormat("  loss %.4f", loss / n);
  return absl::StrFormat("training [%s] %s%s  %.0f samples/s  comm %.0f%%", ModeAt(job, iteration),
                         where, loss_part, rate, busy > 0 ? 100.0 * exposed / busy : 0.0);
}

ProgressLine::Look ProgressLine::See(const JobStatus& job, Clock::time_point begin,
                                     Clock::time_point now) {
  // Even an ended job's progress is news: its last iterations may not have been seen yet.
  const std::string training = TrainingLine(job, now);
  if (!training.empty()) last_training_ = training;
  if (scheduler::IsTerminal(job.state())) return {};

  const int workers = job.workers_size();  // the slots: more than the spec once grown
  const int64_t planned = job.planned_iterations();
  const int64_t slowest = SlowestIteration(job);
  int finished = 0;
  for (const auto& m : job.workers()) finished += m.finished();
  if (finished > 0 || (planned > 0 && slowest >= planned - 1)) {
    if (phase_ != Phase::kEvaluating) evaluating_since_ = now;
    const double t = Seconds(now - evaluating_since_).count();
    const bool rank0_done = job.workers_size() > 0 && job.workers(0).finished();
    const std::string what = rank0_done ? "finishing" : "evaluating: rank 0 on the test set";
    const std::string key =
        absl::StrFormat("%s, %s done", what, CountOf(finished, workers, "worker"));
    return {Phase::kEvaluating, key, absl::StrFormat("%s, %.0f s", key, t)};
  }
  if (!training.empty()) return {Phase::kTraining, training, training};

  const int servers = job.spec().servers();
  const int w = Registered(job.workers()), s = Registered(job.servers());
  std::string key;
  if (w < workers || s < servers) {
    key = "starting: " + CountOf(w, workers, "worker");
    if (servers > 0) key += " and " + CountOf(s, servers, "server");
    key += " registered";
  } else if (job.state() == herd::v1::JOB_PENDING) {
    key = "starting: " + Count(workers, "worker");
    if (servers > 0) key += " and " + Count(servers, "server");
    key += " registered, loading the model and data";
  } else {
    key = "starting: every process is running, first iterations";
  }
  return {Phase::kStarting, key, absl::StrFormat("%s, %.0f s", key, Seconds(now - begin).count())};
}

void ProgressLine::Update(const JobStatus& job, Clock::time_point begin, Clock::time_point now) {
  if (finished_) return;
  const Look look = See(job, begin, now);
  if (look.line.empty()) return;
  if (tty_) {
    Draw(look.line);
  } else {
    // The log keeps the job's last training line before it moves on to evaluating.
    if (look.phase == Phase::kEvaluating && phase_ == Phase::kTraining) PrintLastTraining();
    const bool due =
        look.phase != phase_ || look.phase != Phase::kTraining || now - printed_at_ >= kLogInterval;
    if (look.key != printed_key_ && due) {
      Print(look.line);
      printed_key_ = look.key;
      printed_at_ = now;
    }
  }
  phase_ = look.phase;
}

void ProgressLine::Finish() {
  if (finished_) return;
  finished_ = true;
  if (tty_) {
    if (!last_training_.empty() && drawn_text_ != last_training_) Draw(last_training_);
    if (!drawn_text_.empty()) std::fprintf(out_, "\n");
    std::fflush(out_);
  } else {
    PrintLastTraining();
  }
}

void ProgressLine::PrintLastTraining() {
  if (last_training_.empty() || printed_training_ == last_training_) return;
  Print(last_training_);
}

void ProgressLine::Draw(const std::string& line) {
  // Blank what a longer previous line leaves behind.
  const size_t pad = drawn_text_.size() > line.size() ? drawn_text_.size() - line.size() : 0;
  std::fprintf(out_, "\r%s%s", line.c_str(), std::string(pad, ' ').c_str());
  std::fflush(out_);
  drawn_text_ = line;
}

void ProgressLine::Print(const std::string& line) {
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
  if (line == last_training_) printed_training_ = line;
}

}  // namespace herd::cli
