#pragma once
// Wall-clock time as herd's records carry it (a job's submitted_unix_ms, a membership event's
// detected_unix_ms, a checkpoint's commit time): milliseconds since the Unix epoch. Durations
// are measured with steady_clock instead; this clock may jump.

#include <chrono>
#include <cstdint>

namespace herd {

inline int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace herd
