#pragma once
// `herd plot`'s pieces: finding a job's history file (metrics/history.h) under a directory,
// and drawing it with gnuplot as a PNG: loss, the job's samples/s and exposed communication
// over iterations, one panel each, with a dashed line and the mode's name wherever the mode
// changed.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "metrics/history.h"

namespace herd::cli {

// `path` itself when it is a file; else the history file under the directory `path` (a
// scheduler's --state, or a `herd local --state` that holds one), of job `job` when given.
// NOT_FOUND when there is none; INVALID_ARGUMENT listing them when several jobs have one and
// no `job` picks one.
absl::StatusOr<std::string> FindHistoryFile(const std::string& path, const std::string& job);

// The gnuplot program that draws `records` (sorted by iteration, not empty) from the data file
// `data` into the PNG `out`, titled `title`.
std::string GnuplotScript(const std::vector<metrics::HistoryRecord>& records,
                          const std::string& data, const std::string& out,
                          const std::string& title);

// Writes the data and the program to a temporary directory and runs gnuplot on them.
// FAILED_PRECONDITION when the history is empty or gnuplot is not installed; INTERNAL with
// gnuplot's message when it fails.
absl::Status DrawHistory(const std::vector<metrics::HistoryRecord>& records,
                         const std::string& title, const std::string& out);

}  // namespace herd::cli
