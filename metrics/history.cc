#include "metrics/history.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_format.h"
#include "common/json.h"
#include "common/logging.h"

namespace herd::metrics {
namespace {

const json::Field<HistoryRecord> kFields[] = {
    {"iteration", &HistoryRecord::iteration},
    {"loss", &HistoryRecord::loss},
    {"samples_per_second", &HistoryRecord::samples_per_second},
    {"exposed_comm_seconds", &HistoryRecord::exposed_comm_seconds},
    {"iteration_seconds", &HistoryRecord::iteration_seconds},
    {"mode", &HistoryRecord::mode},
    {"epoch", &HistoryRecord::epoch},
    {"workers", &HistoryRecord::workers},
    {"unix_ms", &HistoryRecord::unix_ms},
};

}  // namespace

std::string HistoryLine(const HistoryRecord& record) {
  return json::ToObject(record, kFields).Write();
}

absl::StatusOr<std::vector<HistoryRecord>> ReadHistory(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrFormat("cannot read history file %s", path));
  std::map<int64_t, HistoryRecord> by_iteration;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    auto object = json::ParseObject(line);
    HistoryRecord record;
    absl::Status st = object.ok() ? json::FromObject(*object, kFields, record) : object.status();
    if (!st.ok()) {
      // A line cut short by a crash while writing is the last one: skip it, say nothing.
      if (in.peek() == EOF && !line.empty() && line.back() != '}') break;
      return absl::InvalidArgumentError(
          absl::StrFormat("%s line %d is not a history record: %s", path, number, st.message()));
    }
    by_iteration[record.iteration] = std::move(record);
  }
  std::vector<HistoryRecord> out;
  out.reserve(by_iteration.size());
  for (auto& [iteration, record] : by_iteration) out.push_back(std::move(record));
  return out;
}

HistoryWriter::~HistoryWriter() {
  for (auto& [job, file] : files_) {
    if (file != nullptr) std::fclose(file);
  }
}

std::string HistoryWriter::PathOf(const std::string& job) const {
  return (std::filesystem::path(dir_) / (job + ".jsonl")).string();
}

void HistoryWriter::Append(const std::string& job, const HistoryRecord& record) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(job);
  if (it == files_.end()) {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    FILE* file = ec ? nullptr : std::fopen(PathOf(job).c_str(), "ae");
    if (file == nullptr) {
      Log().warn("history of job '{}': cannot open {}; no history is kept for it", job,
                 PathOf(job));
    }
    it = files_.emplace(job, file).first;
  }
  if (it->second == nullptr) return;
  const std::string line = HistoryLine(record) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), it->second) != line.size() ||
      std::fflush(it->second) != 0) {
    Log().warn("history of job '{}': cannot write {}; no more history is kept for it", job,
               PathOf(job));
    std::fclose(it->second);
    it->second = nullptr;
  }
}

}  // namespace herd::metrics
