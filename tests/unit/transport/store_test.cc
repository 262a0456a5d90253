#include "transport/store/store.h"

#include <chrono>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

namespace herd::transport {
namespace {

using namespace std::chrono_literals;

void ExerciseStore(Store& store) {
  ASSERT_TRUE(store.Set("job/0/rank/1", std::string("addr\0bytes", 10)).ok());
  auto v = store.Get("job/0/rank/1", Deadline::After(1s));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, std::string("addr\0bytes", 10));
  EXPECT_EQ(store.Set("job/0/rank/1", "other").code(), absl::StatusCode::kAlreadyExists);
  // A Get waits for a key that appears later.
  std::thread writer([&] {
    std::this_thread::sleep_for(30ms);
    (void)store.Set("late", "here");
  });
  auto late = store.Get("late", Deadline::After(5s));
  writer.join();
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(*late, "here");
  auto missing = store.Get("never", Deadline::After(30ms));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(missing.status().message().find("never"), std::string_view::npos);
}

TEST(StoreTest, InProcess) {
  auto store = MakeInProcessStore();
  ExerciseStore(*store);
}

TEST(StoreTest, FileStore) {
  auto dir =
      std::filesystem::temp_directory_path() / ("herd_store_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto store = MakeFileStore(dir.string());
  ASSERT_TRUE(store.ok()) << store.status();
  ExerciseStore(**store);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace herd::transport
