#include "cli/local/progress.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "absl/strings/str_format.h"

namespace herd::cli {
namespace {

// The mode the job's schedule gives an iteration.
std::string ModeAt(const herd::v1::JobStatus& job, int64_t iteration) {
  std::string mode = job.spec().mode().mode();
  for (const auto& sw : job.schedule()) {
    if (sw.from_iteration() <= iteration) mode = sw.mode().mode();
  }
  return mode;
}

}  // namespace

ProgressLine::ProgressLine(bool tty, int64_t iterations_per_epoch, int64_t total, int batch_size)
    : tty_(tty),
      per_epoch_(std::max<int64_t>(1, iterations_per_epoch)),
      total_(total),
      batch_size_(batch_size) {}

void ProgressLine::Update(const herd::v1::JobStatus& job,
                          std::chrono::steady_clock::time_point begin) {
  const auto now = std::chrono::steady_clock::now();
  if (job.progress().empty()) {
    if (!tty_) return;
    std::fprintf(stderr, "\r%-100s", absl::StrFormat("waiting for %d workers and %d servers... %.0f s",
                                                     job.spec().workers(), job.spec().servers(),
                                                     std::chrono::duration<double>(now - begin).count())
                                         .c_str());
    drawn_ = true;
    return;
  }
  // The job is as far as its slowest worker.
  int64_t iteration = INT64_MAX;
  double loss = 0, exposed = 0, seconds = 0;
  for (const auto& p : job.progress()) {
    iteration = std::min(iteration, p.iteration());
    loss += p.stats().loss();
    exposed += p.stats().exposed_comm_seconds();
    seconds += p.stats().iteration_seconds();
  }
  const int n = job.progress_size();
  loss /= n;
  if (first_iteration_ < 0) {
    first_iteration_ = iteration;
    first_seen_ = now;
  }
  const double elapsed = std::chrono::duration<double>(now - first_seen_).count();
  const double rate = elapsed > 0 ? static_cast<double>(iteration - first_iteration_) *
                                        batch_size_ * job.spec().workers() / elapsed
                                  : 0;
  const std::string line = absl::StrFormat(
      "epoch %d/%d  iteration %d/%d  loss %.4f  %.0f samples/s  exposed comm %.0f%%  [%s]",
      iteration / per_epoch_ + 1, (total_ + per_epoch_ - 1) / per_epoch_, iteration + 1, total_,
      loss, rate, seconds > 0 ? 100.0 * exposed / seconds : 0.0,
      ModeAt(job, iteration + 1));
  if (tty_) {
    std::fprintf(stderr, "\r%-100s", line.c_str());
    drawn_ = true;
  } else if (now - last_print_ >= std::chrono::seconds(5)) {
    std::fprintf(stderr, "%s\n", line.c_str());
    last_print_ = now;
  }
}

void ProgressLine::Finish() {
  if (tty_ && drawn_) std::fprintf(stderr, "\n");
  drawn_ = false;
}

}  // namespace herd::cli
