#pragma once
// How the NCCL backend waits for the GPU and for NCCL's background threads: by polling (CUDA
// events and ncclCommGetAsyncError have no blocking wait with a timeout). The first polls only
// yield, because a GPU operation often finishes within microseconds; later ones sleep, doubling
// up to a cap, so that several ranks sharing a few cores do not starve each other. A sleep never
// runs past the deadline.

#include <algorithm>
#include <chrono>
#include <thread>

#include "common/deadline.h"

namespace herd::transport::nccl {

class PollBackoff {
 public:
  explicit PollBackoff(std::chrono::microseconds cap = std::chrono::milliseconds(1)) : cap_(cap) {}

  void Wait(const Deadline& deadline) {
    if (polls_++ < kYieldPolls) {
      std::this_thread::yield();
      return;
    }
    auto nap = std::min<std::chrono::nanoseconds>(sleep_, deadline.remaining());
    if (nap.count() > 0) std::this_thread::sleep_for(nap);
    sleep_ = std::min(sleep_ * 2, cap_);
  }

 private:
  static constexpr int kYieldPolls = 32;
  std::chrono::microseconds cap_;
  std::chrono::microseconds sleep_{10};
  int polls_ = 0;
};

}  // namespace herd::transport::nccl
