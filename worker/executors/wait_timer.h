#pragma once
// Times a wait of the compute thread on communication: the seconds go to the executor's
// exposed-communication counter and the wait is drawn on the compute lane of the timeline.

#include <chrono>
#include <string>

#include "common/timeline.h"

namespace herd::worker {

class WaitTimer {
 public:
  WaitTimer(double* exposed_seconds, Timeline* timeline, std::string name)
      : sink_(exposed_seconds), span_(timeline, name, Timeline::Lane::kCompute),
        begin_(std::chrono::steady_clock::now()) {}
  ~WaitTimer() {
    *sink_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - begin_).count();
  }
  WaitTimer(const WaitTimer&) = delete;
  WaitTimer& operator=(const WaitTimer&) = delete;

 private:
  double* sink_;
  Timeline::Span span_;
  std::chrono::steady_clock::time_point begin_;
};

}  // namespace herd::worker
