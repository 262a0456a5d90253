#pragma once
// Calls that ride out a peer restarting: again while the answer is UNAVAILABLE (the peer is not
// there yet, or says it is shutting down and its successor will answer), until a deadline.
// Any other answer, success or refusal, is returned at once: retrying a refusal cannot change
// it. The pause between attempts is short against the restart it waits out (a scheduler comes
// back within seconds) and long against a call's cost.

#include <algorithm>
#include <chrono>
#include <thread>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/deadline.h"

namespace herd {

inline constexpr std::chrono::milliseconds kRetryPause{200};

namespace retry_internal {
inline const absl::Status& StatusOf(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& StatusOf(const absl::StatusOr<T>& s) {
  return s.status();
}
}  // namespace retry_internal

// `attempt()` returns absl::Status or absl::StatusOr<T>; its last answer is returned (the last
// UNAVAILABLE once `deadline` has passed).
template <typename Attempt>
std::invoke_result_t<Attempt&> RetryWhileUnavailable(
    Attempt attempt, Deadline deadline, std::chrono::milliseconds pause = kRetryPause) {
  for (;;) {
    auto answer = attempt();
    if (!absl::IsUnavailable(retry_internal::StatusOf(answer)) || deadline.expired()) {
      return answer;
    }
    std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(pause, deadline.remaining()));
  }
}

}  // namespace herd
