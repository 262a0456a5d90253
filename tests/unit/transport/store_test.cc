#include "transport/store/store.h"

#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace herd::transport {
namespace {

using namespace std::chrono_literals;

void ExerciseGetMany(Store& store) {
  ASSERT_TRUE(store.Set("many/0", "zero").ok());
  ASSERT_TRUE(store.Set("many/1", std::string("o\0ne", 4)).ok());
  // The values in the order asked, a key asked twice answered twice.
  auto got = store.GetMany({"many/1", "many/0", "many/1"}, Deadline::After(1s));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got,
            (std::vector<std::string>{std::string("o\0ne", 4), "zero", std::string("o\0ne", 4)}));
  auto none = store.GetMany({}, Deadline::After(1s));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
  // It waits for keys that appear later.
  std::thread writer([&] {
    std::this_thread::sleep_for(30ms);
    (void)store.Set("many/2", "two");
    std::this_thread::sleep_for(30ms);
    (void)store.Set("many/3", "three");
  });
  auto waited = store.GetMany({"many/3", "many/0", "many/2"}, Deadline::After(5s));
  writer.join();
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_EQ(*waited, (std::vector<std::string>{"three", "zero", "two"}));
  // At the deadline: DEADLINE_EXCEEDED naming every missing key, and their positions.
  std::vector<size_t> missing;
  auto start = Clock::now();
  auto late =
      store.GetMany({"many/0", "gone/a", "many/1", "gone/b"}, Deadline::After(50ms), &missing);
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(late.status().message().find("'gone/a', 'gone/b' (2 of 4)"), std::string_view::npos)
      << late.status();
  EXPECT_EQ(missing, (std::vector<size_t>{1, 3}));
  // Many missing keys: the message names eight and counts the rest.
  std::vector<std::string> absent;
  for (int i = 0; i < 20; ++i) absent.push_back("absent/" + std::to_string(i));
  auto lots = store.GetMany(absent, Deadline::After(10ms));
  EXPECT_EQ(lots.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(lots.status().message().find("'absent/7' and 12 more (20 of 20)"),
            std::string_view::npos)
      << lots.status();
}

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
  ExerciseGetMany(store);
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
