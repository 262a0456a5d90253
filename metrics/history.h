#pragma once
// A job's per-iteration history: one JSON object per line (JSON lines), appended by the
// scheduler from rank 0's reports to STATE/history/JOB.jsonl (STATE: the scheduler's --state),
// and read by `herd plot`. The format, field by field, is in docs/metrics.md:
//
//   {"iteration":12,"loss":0.61,"samples_per_second":5120.5,"exposed_comm_seconds":0.002,
//    "iteration_seconds":0.05,"mode":"dear","epoch":1,"workers":4,"unix_ms":1700000000000}
//
// Lines are appended in the order reports arrive; a job resumed from a checkpoint (or rolled
// back by a membership change) appends iterations it had reported before, and readers keep
// the last line of each iteration.

#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace herd::metrics {

struct HistoryRecord {
  int64_t iteration = 0;
  double loss = 0;
  double samples_per_second = 0;  // the whole job's: workers x rank 0's rate
  double exposed_comm_seconds = 0;
  double iteration_seconds = 0;
  std::string mode;
  uint64_t epoch = 0;
  int workers = 0;
  int64_t unix_ms = 0;  // when the scheduler received the report
};

std::string HistoryLine(const HistoryRecord& record);  // one line, no newline

// Reads a history file: the records by iteration (the last line of each iteration wins).
// NOT_FOUND when the file is missing, INVALID_ARGUMENT naming the file and line for a line that
// is not a record. An empty file gives no records (not an error: the caller decides).
absl::StatusOr<std::vector<HistoryRecord>> ReadHistory(const std::string& path);

// Appends records to DIR/JOB.jsonl, one file per job, each line flushed as it is written (a
// reader such as `herd plot` sees whole lines while the job runs). Thread-safe. Errors (a full
// disk) are logged once per job and the history of that job stops: it is informational and
// never fails the job.
class HistoryWriter {
 public:
  explicit HistoryWriter(std::string dir) : dir_(std::move(dir)) {}
  ~HistoryWriter();
  HistoryWriter(const HistoryWriter&) = delete;
  HistoryWriter& operator=(const HistoryWriter&) = delete;

  void Append(const std::string& job, const HistoryRecord& record);
  std::string PathOf(const std::string& job) const;

 private:
  const std::string dir_;
  std::mutex mu_;
  std::map<std::string, FILE*> files_;  // guarded by mu_; nullptr: failed, given up
};

}  // namespace herd::metrics
