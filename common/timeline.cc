#include "common/timeline.h"

#include <unistd.h>

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

// The wall-clock time of a steady-clock instant: the system clock read between two steady
// readings, so the anchor is off by at most half the (sub-microsecond) gap between them.
int64_t UnixMicrosAt(std::chrono::steady_clock::time_point origin) {
  using std::chrono::duration_cast;
  using std::chrono::microseconds;
  const auto before = std::chrono::steady_clock::now();
  const auto wall = std::chrono::system_clock::now();
  const auto after = std::chrono::steady_clock::now();
  const auto steady_mid = before + (after - before) / 2;
  return duration_cast<microseconds>(wall.time_since_epoch()).count() -
         duration_cast<microseconds>(steady_mid - origin).count();
}

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

}  // namespace

Timeline::Timeline(std::string path, int rank)
    : path_(std::move(path)), pid_(rank), origin_unix_us_(UnixMicrosAt(origin_)) {}

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
    const std::string host = json::Value(HostName()).Write();  // quoted and escaped
    const int os_pid = static_cast<int>(::getpid());
    const std::string process =
        json::Value(absl::StrFormat("rank %d (pid %d, %s)", pid_, os_pid, HostName())).Write();
    out << absl::StrFormat(
        "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":%s}},\n",
        pid_, process);
    out << absl::StrFormat(
        "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,"
        "\"args\":{\"sort_index\":%d}}",
        pid_, pid_);
    for (const Event& e : events_) {
      out << absl::StrFormat(
          ",\n{\"name\":%s,\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%d,\"dur\":%d}",
          // Event names are ours (fixed words and numbers), but escaped so the file always parses.
          json::Value(e.name).Write(), pid_, static_cast<int>(e.lane), e.begin_us, e.dur_us);
    }
    // What `herd timeline merge` aligns the files with (the header says how).
    out << absl::StrFormat(
        "\n],\n\"otherData\":{\"herd_rank\":%d,\"herd_pid\":%d,\"herd_host\":%s,"
        "\"herd_origin_unix_us\":%d}}\n",
        pid_, os_pid, host, origin_unix_us_);
    if (!out.flush()) return absl::InternalError(absl::StrFormat("cannot write timeline %s", tmp));
  }
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) {
    return absl::InternalError(absl::StrFormat("cannot rename %s to %s", tmp, path_));
  }
  return absl::OkStatus();
}

}  // namespace herd
