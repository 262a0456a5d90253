// The training loop's allocator settings (worker/training_memory.h): a large block freed and
// allocated again stays in the process instead of being faulted in anew, and a user's own
// glibc malloc settings are left alone.
#include "worker/training_memory.h"

#include <sys/resource.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "gtest/gtest.h"

namespace herd::worker {
namespace {

// Keeps the compiler from eliding a malloc/free pair.
char* volatile g_sink = nullptr;

long MinorFaults() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// Allocates `bytes`, writes every page, frees it; returns the page faults that took.
long FaultsOfTouchedBlock(size_t bytes) {
  const long before = MinorFaults();
  g_sink = static_cast<char*>(std::malloc(bytes));
  std::memset(g_sink, 1, bytes);
  std::free(g_sink);
  g_sink = nullptr;
  return MinorFaults() - before;
}

// Sets (or unsets, nullopt) an environment variable for one test and restores it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(TrainingMemoryTest, AFreedBlockIsReusedWithoutPageFaults) {
  if (UserChoseMallocSettings()) GTEST_SKIP() << "this environment sets glibc's malloc";
  EXPECT_NE(KeepTrainingMemory(), "");
  EXPECT_EQ(KeepTrainingMemory(), "") << "once per process";
  constexpr size_t kBlock = 16 << 20;  // 4096 pages: what glibc's defaults fault in every time
  FaultsOfTouchedBlock(kBlock);        // the heap grows once
  for (int i = 0; i < 3; ++i) {
    EXPECT_LT(FaultsOfTouchedBlock(kBlock), 64) << "round " << i;
  }
}

TEST(TrainingMemoryTest, TheUsersMallocSettingsWin) {
  ScopedEnv tunables("GLIBC_TUNABLES", std::nullopt);
  ScopedEnv trim("MALLOC_TRIM_THRESHOLD_", std::nullopt);
  ScopedEnv mmap("MALLOC_MMAP_THRESHOLD_", std::nullopt);
  ScopedEnv pad("MALLOC_TOP_PAD_", std::nullopt);
  ScopedEnv max("MALLOC_MMAP_MAX_", std::nullopt);
  ScopedEnv arenas("MALLOC_ARENA_MAX", std::nullopt);
  EXPECT_FALSE(UserChoseMallocSettings());
  {
    ScopedEnv other("GLIBC_TUNABLES", "glibc.rtld.nns=2");
    EXPECT_FALSE(UserChoseMallocSettings());
  }
  {
    ScopedEnv t("GLIBC_TUNABLES", "glibc.rtld.nns=2:glibc.malloc.trim_threshold=4096");
    EXPECT_TRUE(UserChoseMallocSettings());
  }
  {
    ScopedEnv a("MALLOC_ARENA_MAX", "2");
    EXPECT_TRUE(UserChoseMallocSettings());
  }
}

}  // namespace
}  // namespace herd::worker
