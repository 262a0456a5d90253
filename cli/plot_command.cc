// `herd plot DIR --out plot.png`: draws a job's per-iteration history (its scheduler writes
// STATE/history/JOB.jsonl, docs/metrics.md) with gnuplot: loss, samples/s and exposed
// communication over iterations, mode switches marked. DIR is a scheduler's --state, a
// `herd local --state`, or the history file itself.

#include <cstdio>
#include <filesystem>
#include <string>

#include "absl/strings/str_format.h"
#include "cli/command.h"
#include "cli/plot/history_plot.h"
#include "metrics/history.h"

namespace herd::cli {
namespace {

class PlotCommand final : public Command {
 public:
  void Configure(CLI::App& app) override {
    app.add_option("dir", dir_,
                   "A job's state: the scheduler's --state, herd local's --state, or a "
                   "history file (JOB.jsonl)")
        ->required();
    app.add_option("--out", out_, "The PNG to write")->required();
    app.add_option("--job", job_, "The job, when DIR holds the history of several");
  }

  int Run() override {
    auto file = FindHistoryFile(dir_, job_);
    if (!file.ok()) return Fail(file.status());
    auto records = metrics::ReadHistory(*file);
    if (!records.ok()) return Fail(records.status());
    if (records->empty()) {
      return Fail(absl::FailedPreconditionError(absl::StrFormat(
          "%s holds no iterations yet: nothing to plot (is the job still starting?)", *file)));
    }
    const std::string job = std::filesystem::path(*file).stem().string();
    const std::string title =
        absl::StrFormat("herd job %s: iterations %d-%d", job, records->front().iteration,
                        records->back().iteration);
    if (auto st = DrawHistory(*records, title, out_); !st.ok()) return Fail(st);
    std::printf("plot of job %s (%zu iterations) in %s\n", job.c_str(), records->size(),
                out_.c_str());
    return kExitOk;
  }

 private:
  static int Fail(const absl::Status& st) {
    std::fprintf(stderr, "herd plot: %s\n", std::string(st.message()).c_str());
    return kExitFailure;
  }

  std::string dir_, out_, job_;
};

HERD_REGISTER_COMMAND(PlotCommand, "plot", 75,
                      "Draw a job's history (loss, samples/s, exposed communication, mode "
                      "switches) as a PNG with gnuplot");

}  // namespace
}  // namespace herd::cli
