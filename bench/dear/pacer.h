#pragma once
// Spends the replay's compute time. A layer's forward or backward runs on a GPU in the real
// system, leaving the CPU to communication; the replay stands in for it by sleeping, so the
// communication threads of all ranks keep the cores.
//
// Sleeps overshoot by tens of microseconds each (milliseconds on a loaded machine), which over
// ~300 layer phases per iteration would add up. So the pacer keeps a compute clock: each
// Spend(d) advances it by d and sleeps until it, and an overshoot is taken back from the next
// sleeps. Only an executor call that blocked (took more than kStall: waiting on
// communication) moves the clock to its end, since compute cannot go on before it returns;
// shorter calls (copying a gradient into its bucket) count as overlapped with compute, as they
// would be on a GPU.

#include <chrono>

namespace herd::emulator {

class Pacer {
 public:
  static constexpr std::chrono::microseconds kStall{250};

  // Sets this thread's timer slack to the minimum (per thread: call it on the pacing thread)
  // and starts the compute clock now.
  Pacer();
  void Restart();              // the clock starts again from now (a new iteration)
  void Spend(double seconds);  // one layer's forward or backward
  // After an executor call that began at `call_start`: catches the clock up if it blocked.
  void AfterExecutorCall(std::chrono::steady_clock::time_point call_start);

 private:
  std::chrono::steady_clock::time_point clock_;
};

}  // namespace herd::emulator
