#pragma once
// A point in time after which a wait gives up. Every blocking call in herd takes one.

#include <chrono>

namespace herd {

using Clock = std::chrono::steady_clock;

class Deadline {
 public:
  static Deadline After(std::chrono::nanoseconds d) { return Deadline(Clock::now() + d); }
  static Deadline Infinite() { return Deadline(Clock::time_point::max()); }
  explicit Deadline(Clock::time_point at) : at_(at) {}

  Clock::time_point at() const { return at_; }
  bool expired() const { return Clock::now() >= at_; }
  bool infinite() const { return at_ == Clock::time_point::max(); }
  // Time left, never negative.
  std::chrono::nanoseconds remaining() const {
    if (infinite()) return std::chrono::nanoseconds::max();
    auto left = at_ - Clock::now();
    return left.count() > 0 ? std::chrono::duration_cast<std::chrono::nanoseconds>(left)
                            : std::chrono::nanoseconds(0);
  }

 private:
  Clock::time_point at_;
};

}  // namespace herd
