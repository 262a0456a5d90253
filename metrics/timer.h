#pragma once
// Observes the seconds from its construction to its destruction into a histogram: one
// steady_clock read at each end, for timing a call on every path it can return by.

#include <prometheus/histogram.h>

#include <chrono>

namespace herd::metrics {

class ScopedTimer {
 public:
  explicit ScopedTimer(prometheus::Histogram& into)
      : into_(into), begin_(std::chrono::steady_clock::now()) {}
  ~ScopedTimer() {
    into_.Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - begin_).count());
  }
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

 private:
  prometheus::Histogram& into_;
  std::chrono::steady_clock::time_point begin_;
};

}  // namespace herd::metrics
