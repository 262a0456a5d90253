#include "cli/plot/history_plot.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/child_processes.h"
#include "common/temp_dir.h"

namespace herd::cli {
namespace {

namespace fs = std::filesystem;

// A string inside gnuplot's double quotes.
std::string Quoted(const std::string& s) {
  return "\"" + absl::StrReplaceAll(s, {{"\\", "\\\\"}, {"\"", "\\\""}}) + "\"";
}

// Per-iteration throughput is noisy (a slow step, a checkpoint): the plot shows each value and
// the mean over this many iterations around it.
constexpr int kSmoothWindow = 10;

}  // namespace

absl::StatusOr<std::string> FindHistoryFile(const std::string& path, const std::string& job) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return path;
  if (!fs::is_directory(path, ec)) {
    return absl::NotFoundError(absl::StrFormat("%s: no such file or directory", path));
  }
  // history/JOB.jsonl files at most a few levels down: STATE/scheduler-state/history/...
  std::vector<fs::path> found;
  for (auto it = fs::recursive_directory_iterator(
           path, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it.depth() > 3) {
      it.disable_recursion_pending();
      continue;
    }
    const fs::path& p = it->path();
    std::error_code file_ec;
    if (p.extension() == ".jsonl" && p.parent_path().filename() == "history" &&
        it->is_regular_file(file_ec) && (job.empty() || p.stem() == job)) {
      found.push_back(p);
    }
  }
  std::sort(found.begin(), found.end());
  if (found.empty()) {
    return absl::NotFoundError(absl::StrFormat(
        "no job history under %s%s (a job's scheduler writes STATE/history/JOB.jsonl as it "
        "trains; give the scheduler's --state or herd local's --state)",
        path, job.empty() ? "" : " for job '" + job + "'"));
  }
  if (found.size() > 1) {
    std::vector<std::string> jobs;
    for (const fs::path& p : found) jobs.push_back(p.stem().string());
    return absl::InvalidArgumentError(
        absl::StrFormat("%s holds the history of several jobs (%s): pick one with --job", path,
                        absl::StrJoin(jobs, ", ")));
  }
  return found.front().string();
}

std::string GnuplotScript(const std::vector<metrics::HistoryRecord>& records,
                          const std::string& data, const std::string& out,
                          const std::string& title) {
  std::string s;
  // noenhanced: mode names have underscores, which enhanced text would make subscripts.
  s += "set terminal pngcairo noenhanced size 1100,900 font 'sans,10'\n";
  s += "set output " + Quoted(out) + "\n";
  s += "set datafile separator '\\t'\n";
  s += "set grid\nset key top right\nset xlabel 'iteration'\n";
  s += absl::StrFormat("set xrange [%d:%d]\n", records.front().iteration,
                       std::max(records.back().iteration, records.front().iteration + 1));
  // The mode switches: a dashed line at the first iteration of each new mode, and its name.
  std::string previous;
  int n = 0;
  for (const auto& r : records) {
    if (r.mode != previous) {
      ++n;
      s += absl::StrFormat(
          "set arrow %d from %d, graph 0 to %d, graph 1 nohead dashtype 2 lc rgb 'gray40'\n", n,
          r.iteration, r.iteration);
      s += absl::StrFormat("set label %d %s at %d, graph 0.97 offset 0.5,0 tc rgb 'gray20'\n", n,
                           Quoted(r.mode.empty() ? "?" : r.mode), r.iteration);
      previous = r.mode;
    }
  }
  s += "set multiplot layout 3,1 title " + Quoted(title) + "\n";
  const std::string d = Quoted(data);
  s += "set ylabel 'loss (rank 0)'\n";
  s += "plot " + d + " using 1:2 with lines lw 1.5 lc rgb '#1f77b4' title 'loss'\n";
  s += "set ylabel 'samples/s (job)'\n";
  s += "plot " + d + " using 1:3 with lines lc rgb '#a6cee3' title 'samples/s', " + d +
       absl::StrFormat(" using 1:5 with lines lw 2 lc rgb '#ff7f0e' title 'mean of %d'\n",
                       kSmoothWindow);
  s += "set ylabel 'exposed comm (ms, rank 0)'\n";
  s += "plot " + d +
       " using 1:($4*1000) with lines lc rgb '#2ca02c' title 'exposed communication'\n";
  s += "unset multiplot\n";
  return s;
}

absl::Status DrawHistory(const std::vector<metrics::HistoryRecord>& records,
                         const std::string& title, const std::string& out) {
  if (records.empty()) {
    return absl::FailedPreconditionError(
        "the history has no iterations yet: nothing to plot (is the job still starting?)");
  }
  auto tmp = TempDir::Create("herd-plot");
  if (!tmp.ok()) return tmp.status();
  const std::string data = tmp->path() + "/history.tsv";
  const std::string script = tmp->path() + "/plot.gp";
  {
    std::ofstream f(data);
    for (size_t i = 0; i < records.size(); ++i) {
      const size_t lo = i >= kSmoothWindow / 2 ? i - kSmoothWindow / 2 : 0;
      const size_t hi = std::min(records.size(), i + kSmoothWindow / 2 + 1);
      double sum = 0;
      for (size_t j = lo; j < hi; ++j) sum += records[j].samples_per_second;
      const auto& r = records[i];
      f << absl::StrFormat("%d\t%.9g\t%.9g\t%.9g\t%.9g\n", r.iteration, r.loss,
                           r.samples_per_second, r.exposed_comm_seconds,
                           sum / static_cast<double>(hi - lo));
    }
    std::ofstream(script) << GnuplotScript(records, data, out, title);
    if (!f.flush()) return absl::InternalError("cannot write " + data);
  }
  auto ran = RunCommand({"gnuplot", script}, Deadline::After(std::chrono::seconds(60)));
  if (absl::IsFailedPrecondition(ran.status())) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "gnuplot is not installed (%s): install gnuplot-nox (./scripts/install-deps.sh does)",
        ran.status().message()));
  }
  if (!ran.ok()) return ran.status();
  std::error_code ec;
  if (!fs::is_regular_file(out, ec) || fs::file_size(out, ec) == 0) {
    return absl::InternalError(absl::StrFormat("gnuplot ran but wrote no %s", out));
  }
  return absl::OkStatus();
}

}  // namespace herd::cli
