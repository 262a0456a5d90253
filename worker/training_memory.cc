#include "worker/training_memory.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "absl/strings/str_format.h"

namespace herd::worker {
namespace {

// glibc refuses an mmap threshold above half its heap size (HEAP_MAX_SIZE / 2 = 32 MiB on
// 64-bit): the largest block the heap serves.
constexpr int kMmapThreshold = 32 << 20;
// The free memory kept at the heap's top: several iterations' worth of the blocks above.
constexpr int kTrimThreshold = 128 << 20;

}  // namespace

bool UserChoseMallocSettings() {
  for (const char* name : {"MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_",
                           "MALLOC_MMAP_MAX_", "MALLOC_ARENA_MAX"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  return tunables != nullptr && std::strstr(tunables, "glibc.malloc.") != nullptr;
}

std::string KeepTrainingMemory() {
  static std::once_flag once;
  std::string done;
  std::call_once(once, [&] {
    if (UserChoseMallocSettings()) return;
    // Setting either disables glibc's adaptive thresholds, which is the point.
    if (::mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 &&
        ::mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1) {
      done =
          absl::StrFormat("malloc: blocks up to %d MiB from the heap, %d MiB kept free at its top",
                          kMmapThreshold >> 20, kTrimThreshold >> 20);
    }
  });
  return done;
}

}  // namespace herd::worker
