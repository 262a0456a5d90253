#pragma once
// The live progress line of `herd local`, drawn from the scheduler's view of the job (every
// worker reports each iteration): epoch, iteration, loss, samples/s and the share of the
// iteration spent waiting on communication. On a terminal it rewrites one line; otherwise it
// prints a line every few seconds.

#include <chrono>
#include <cstdint>

#include "herd/v1/scheduler.pb.h"

namespace herd::cli {

class ProgressLine {
 public:
  // `iterations_per_epoch` and `total` come from the job's training settings.
  ProgressLine(bool tty, int64_t iterations_per_epoch, int64_t total, int batch_size);
  void Update(const herd::v1::JobStatus& job, std::chrono::steady_clock::time_point begin);
  // Ends the line (a newline after the last rewrite).
  void Finish();

 private:
  bool tty_;
  int64_t per_epoch_;
  int64_t total_;
  int batch_size_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_print_{};
  int64_t first_iteration_ = -1;
  std::chrono::steady_clock::time_point first_seen_{};
};

}  // namespace herd::cli
