#pragma once
// The live progress line of `herd local`, drawn from the scheduler's view of the job
// (JobStatus: who registered, every worker's last iteration and its statistics, who finished,
// how many iterations the workers will run). It says what the job is doing:
//
//   starting: waiting for 3 of 4 workers and 1 of 1 server, 2 s
//   starting: 4 workers and 1 server registered, first iteration, 5 s
//   training: epoch 1/2  iteration 120/936  loss 0.6123  2104 samples/s  comm 31%  [dear]
//   evaluating: rank 0 on the test set, 3 of 4 workers done, 2 s
//
// The training line appears only once there is something true to show: every live worker has
// reported an iteration (a real loss) and the job has been seen to advance (a real rate:
// iterations between two looks at the job, times the global batch, over the time between
// them). Until then the line says the job is starting.
//
// On a terminal the line is rewritten in place; otherwise a line is printed when the phase
// changes, and while training at most every 5 s (never the same text twice in a row). Finish()
// leaves the last training line as the last line, printed once.
//
// Not thread-safe: one thread calls Update and Finish.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "herd/v1/scheduler.pb.h"

namespace herd::cli {

class ProgressLine {
 public:
  using Clock = std::chrono::steady_clock;

  // Writes to `out` (stderr in `herd local`); `tty`: rewrite one line in place.
  ProgressLine(bool tty, std::FILE* out);
  // Shows `job` as of `now`; `begin` is when the run started (for the starting line's time).
  // An ended job shows nothing new, but its progress still makes the last training line.
  void Update(const herd::v1::JobStatus& job, Clock::time_point begin, Clock::time_point now);
  // Ends the display: the last training line (if any) is the last line, and the line is
  // ended. Idempotent; Update does nothing afterwards.
  void Finish();

 private:
  enum class Phase { kNone, kStarting, kTraining, kEvaluating };
  struct Look {
    Phase phase = Phase::kNone;
    std::string key;   // the line without its clock: a log prints a key once
    std::string line;  // "" when there is nothing to show (the job has ended)
  };
  Look See(const herd::v1::JobStatus& job, Clock::time_point begin, Clock::time_point now);
  // The training line of `job`, or "" while there is no loss or rate yet. Tracks the rate.
  std::string TrainingLine(const herd::v1::JobStatus& job, Clock::time_point now);
  void PrintLastTraining();
  void Draw(const std::string& line);
  void Print(const std::string& line);

  const bool tty_;
  std::FILE* const out_;
  Phase phase_ = Phase::kNone;
  bool finished_ = false;

  Clock::time_point evaluating_since_{};

  // Terminal: what is drawn (a shorter line blanks the rest of it); "" when nothing.
  std::string drawn_text_;
  // Log: the key of the last line printed and when; the last training line printed.
  std::string printed_key_;
  Clock::time_point printed_at_{};
  std::string printed_training_;

  // Rate: the first look at which the job had an iteration, and the last look at which it had
  // advanced.
  int64_t first_iteration_ = -1;
  Clock::time_point first_seen_{};
  int64_t last_iteration_ = -1;
  Clock::time_point last_advance_{};
  std::string last_training_;  // the newest training line
};

}  // namespace herd::cli
