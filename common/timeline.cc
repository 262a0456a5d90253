#include "common/timeline.h"

#include <cstdio>
#include <fstream>

#include "absl/strings/str_format.h"
#include "common/json.h"

namespace herd {
namespace {

const char* LaneName(Timeline::Lane lane) {
  switch (lane) {
    case Timeline::Lane::kCompute:
      return "compute";
    case Timeline::Lane::kComm:
      return "communication";
    case Timeline::Lane::kControl:
      return "control";
  }
  return "?";
}

}  // namespace

Timeline::Timeline(std::string path, int pid) : path_(std::move(path)), pid_(pid) {}

void Timeline::Add(std::string_view name, Lane lane, std::chrono::steady_clock::time_point begin,
                   std::chrono::steady_clock::time_point end) {
  if (!enabled()) return;
  using std::chrono::duration_cast;
  using std::chrono::microseconds;
  Event e{std::string(name), lane, duration_cast<microseconds>(begin - origin_).count(),
          duration_cast<microseconds>(end - begin).count()};
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(std::move(e));
}

absl::Status Timeline::Write() const {
  if (!enabled()) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  const std::string tmp = path_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return absl::InternalError(absl::StrFormat("cannot write timeline %s", tmp));
    out << "{\"traceEvents\":[\n";
    // Lane names first, so the viewer labels the rows.
    for (Lane lane : {Lane::kCompute, Lane::kComm, Lane::kControl}) {
      out << absl::StrFormat(
          "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
          "\"args\":{\"name\":\"%s\"}},\n",
          pid_, static_cast<int>(lane), LaneName(lane));
    }
    out << absl::StrFormat(
        "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}}", pid_,
        pid_);
    for (const Event& e : events_) {
      out << absl::StrFormat(
          ",\n{\"name\":%s,\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%d,\"dur\":%d}",
          // Event names are ours (fixed words and numbers), but escaped so the file always parses.
          json::Value(e.name).Write(), pid_, static_cast<int>(e.lane), e.begin_us, e.dur_us);
    }
    out << "\n]}\n";
    if (!out.flush()) return absl::InternalError(absl::StrFormat("cannot write timeline %s", tmp));
  }
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) {
    return absl::InternalError(absl::StrFormat("cannot rename %s to %s", tmp, path_));
  }
  return absl::OkStatus();
}

}  // namespace herd
