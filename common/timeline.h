#pragma once
// A Chrome-trace timeline (the JSON "traceEvents" format that chrome://tracing and Perfetto
// open): complete events with a name, a lane and a start and duration in microseconds. One per
// process; lanes separate what overlaps (compute on one, communication on another), so the
// overlap DeAR and WFBP aim for can be seen.
//
// Clocks: an event's "ts" counts microseconds from the timeline's origin (its construction) on
// the steady clock, which no clock adjustment moves. So that files of several processes can be
// put on one clock (`herd timeline merge`), each file also carries, in its "otherData" object,
// the wall-clock time of that origin and who wrote it:
//
//   "otherData":{"herd_rank":R,"herd_pid":P,"herd_host":"H","herd_origin_unix_us":T}
//
// T is system_clock microseconds since the Unix epoch, read at the same moment as the origin;
// an event's wall-clock time is T + ts. Processes on one machine share that clock exactly;
// across machines the alignment is as good as their clock synchronisation (NTP: about 1 ms).
// The trace's process is the rank (pid R in every event), named "rank R (pid P, H)" and sorted
// by rank, so merged files show one row group per rank, in order.
//
// Thread-safe. Disabled (every call a no-op) unless constructed with a path; Write() at the end.

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace herd {

class Timeline {
 public:
  enum class Lane : int { kCompute = 0, kComm = 1, kControl = 2 };

  Timeline() = default;  // disabled
  // Records for `rank` (the trace's pid, so several files merge into one view). The origin
  // and its wall-clock anchor are taken now.
  Timeline(std::string path, int rank);

  bool enabled() const { return !path_.empty(); }
  // The origin's wall-clock time: microseconds since the Unix epoch (system clock).
  int64_t origin_unix_us() const { return origin_unix_us_; }
  std::chrono::steady_clock::time_point now() const { return std::chrono::steady_clock::now(); }
  void Add(std::string_view name, Lane lane, std::chrono::steady_clock::time_point begin,
           std::chrono::steady_clock::time_point end);
  // Writes every event recorded so far (the file is replaced).
  absl::Status Write() const;

  // Records [construction, destruction) as one event.
  class Span {
   public:
    Span(Timeline* t, std::string_view name, Lane lane)
        : t_(t && t->enabled() ? t : nullptr), name_(name), lane_(lane) {
      if (t_) begin_ = t_->now();
    }
    ~Span() {
      if (t_) t_->Add(name_, lane_, begin_, t_->now());
    }
    Span(const Span&) = delete;
    Span& operator=(const Span&) = delete;

   private:
    Timeline* t_;
    std::string name_;
    Lane lane_;
    std::chrono::steady_clock::time_point begin_;
  };

 private:
  struct Event {
    std::string name;
    Lane lane;
    int64_t begin_us;
    int64_t dur_us;
  };
  std::string path_;
  int pid_ = 0;  // the rank
  std::chrono::steady_clock::time_point origin_ = std::chrono::steady_clock::now();
  int64_t origin_unix_us_ = 0;
  mutable std::mutex mu_;
  std::vector<Event> events_;
};

}  // namespace herd
