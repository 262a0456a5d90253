#pragma once
// A test against the real `herd scheduler` process with a client connected to it: each test
// gets a fresh state directory (named after the test), the scheduler's log on failure, and
// everything removed at the end.

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "scheduler/client/scheduler_client.h"
#include "tests/integration/scheduler/scheduler_process.h"

namespace herd::scheduler::testing {

class SchedulerWithClient : public ::testing::Test {
 protected:
  // `prefix` names the test binary's directories in the temporary directory.
  explicit SchedulerWithClient(std::string prefix) : prefix_(std::move(prefix)) {}

  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           (prefix_ + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    scheduler_.Start((dir_ / "scheduler").string(), 0);
    ClientOptions o;
    o.address = scheduler_.address();
    auto c = SchedulerClient::Connect(o);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = *std::move(c);
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << "scheduler log:\n" << scheduler_.log() << "\n";
    scheduler_.Stop(SIGKILL);
    std::filesystem::remove_all(dir_);
  }

  std::filesystem::path dir_;
  SchedulerProcess scheduler_;
  std::unique_ptr<SchedulerClient> client_;

 private:
  std::string prefix_;
};

}  // namespace herd::scheduler::testing
