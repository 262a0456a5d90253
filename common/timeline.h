#pragma once
// A Chrome-trace timeline (the JSON "traceEvents" format that chrome://tracing and Perfetto
// open): complete events with a name, a lane and a start and duration in microseconds. One per
// process; lanes separate what overlaps (compute on one, communication on another), so the
// overlap DeAR and WFBP aim for can be seen.
//
// Thread-safe. Disabled (every call a no-op) unless constructed with a path; Write() at the end.

#include <chrono>
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
  // Records for `pid` (the worker's rank, so several files merge into one view).
  Timeline(std::string path, int pid);

  bool enabled() const { return !path_.empty(); }
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
  int pid_ = 0;
  std::chrono::steady_clock::time_point origin_ = std::chrono::steady_clock::now();
  mutable std::mutex mu_;
  std::vector<Event> events_;
};

}  // namespace herd
