#include "bench/dear/pacer.h"

#include <sys/prctl.h>

#include <thread>

namespace herd::emulator {

Pacer::Pacer() {
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  Restart();
}

void Pacer::Restart() { clock_ = std::chrono::steady_clock::now(); }

void Pacer::Spend(double seconds) {
  clock_ += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(seconds));
  std::this_thread::sleep_until(clock_);
}

void Pacer::AfterExecutorCall(std::chrono::steady_clock::time_point call_start) {
  const auto now = std::chrono::steady_clock::now();
  if (now - call_start > kStall && now > clock_) clock_ = now;
}

}  // namespace herd::emulator
