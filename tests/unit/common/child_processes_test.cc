// common/child_processes.h: starting, following, stopping; nothing outlives its manager.

#include "common/child_processes.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_format.h"
#include "tests/unit/common/process_test_util.h"

namespace herd {
namespace {

using testing::Alive;
using testing::GoneSoon;
using testing::ReadPid;
using testing::Shell;
using testing::TempPath;

ChildProcesses::Exit WaitExit(ChildProcesses& c) {
  while (true) {
    if (auto e = c.PollExit()) return *e;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

TEST(ChildProcesses, FollowsCapturedLinesAndReportsExits) {
  ChildProcesses c;
  ChildSpec spec = Shell("a", "echo one; echo $HERD_X >&2; printf tail; exit 3");
  spec.env = {"HERD_X=42"};
  ASSERT_EQ(*c.Start(spec), 0u);
  const ChildProcesses::Exit exit = WaitExit(c);
  EXPECT_EQ(exit.name, "a");
  EXPECT_EQ(ChildProcesses::DescribeStatus(exit.status), "exited with status 3");
  EXPECT_FALSE(c.PollExit());  // reported once
  EXPECT_EQ(c.NewLines(0, ChildProcesses::Stream::kStdout),
            (std::vector<std::string>{"one", "tail"}));
  EXPECT_TRUE(c.NewLines(0, ChildProcesses::Stream::kStdout).empty());
  EXPECT_EQ(c.Output(0, ChildProcesses::Stream::kStderr), "42\n");
  EXPECT_EQ(c.LogTail("a"), "42");
}

TEST(ChildProcesses, LogFileTail) {
  const std::string log = TempPath("child.log");
  ChildProcesses c;
  ChildSpec spec = Shell("logger", "for i in 1 2 3 4 5; do echo line $i; done; echo err >&2");
  spec.log_path = log;
  ASSERT_TRUE(c.Start(spec).ok());
  WaitExit(c);
  EXPECT_EQ(c.LogTail("logger", 2), "line 5\nerr");
  EXPECT_FALSE(c.Running("logger"));
  EXPECT_EQ(c.Names(), std::vector<std::string>{"logger"});
}

TEST(ChildProcesses, StopEndsStubbornChildrenAndWhatTheyStarted) {
  const std::string pidfile = TempPath("grandchild");
  ChildProcesses c;
  // Ignores SIGTERM, and started a grandchild (like mpirun's ranks).
  ASSERT_TRUE(c.Start(Shell("stubborn", "sleep 60 & echo $! > " + pidfile +
                                            "; trap '' TERM; while :; do sleep 0.05; done"))
                  .ok());
  const pid_t grandchild = ReadPid(pidfile);
  ASSERT_GT(grandchild, 0);
  const auto start = Clock::now();
  c.Stop({}, 300);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5.0);
  ASSERT_TRUE(c.status(0).has_value());
  EXPECT_TRUE(WIFSIGNALED(*c.status(0)));
  EXPECT_EQ(WTERMSIG(*c.status(0)), SIGKILL);
  EXPECT_TRUE(GoneSoon(grandchild));
  EXPECT_EQ(WaitExit(c).name, "stubborn");  // reported after the stop
}

TEST(ChildProcesses, KillCrashesAChildAtOnceWithoutATermSignal) {
  const std::string marker = TempPath("term-seen");
  ChildProcesses c;
  // Would leave a mark if it got SIGTERM first (what Stop sends).
  ASSERT_TRUE(c.Start(Shell("victim", "trap 'touch " + marker +
                                          "; exit 0' TERM; while :; do sleep 0.05; done"))
                  .ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  c.Kill(0);
  ASSERT_TRUE(c.status(0).has_value());
  EXPECT_TRUE(WIFSIGNALED(*c.status(0)));
  EXPECT_EQ(WTERMSIG(*c.status(0)), SIGKILL);
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the child saw a SIGTERM";
  c.Kill(0);  // a child that ended already: nothing happens
  EXPECT_EQ(WaitExit(c).name, "victim");
}

TEST(ChildProcesses, ChildrenLeadTheirOwnProcessGroup) {
  ChildProcesses c;
  ASSERT_TRUE(c.Start(Shell("g", "ps -o pgid= -p $$ | tr -d ' '")).ok());
  WaitExit(c);
  const std::vector<std::string> lines = c.NewLines(0, ChildProcesses::Stream::kStdout);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(std::stoi(lines[0]), getpgrp());
}

TEST(ChildProcesses, AProgramThatCannotRunExitsWith127AndSaysWhy) {
  ChildProcesses c;
  ASSERT_TRUE(c.Start({.name = "peer", .argv = {"/nonexistent/herd-bench-x"}}).ok());
  const ChildProcesses::Exit exit = WaitExit(c);
  EXPECT_TRUE(WIFEXITED(exit.status) && WEXITSTATUS(exit.status) == 127);
  EXPECT_NE(c.LogTail("peer").find("cannot execute /nonexistent/herd-bench-x"), std::string::npos);
}

TEST(ChildProcesses, DestructorLeavesNothingRunning) {
  const std::string pidfile = TempPath("orphan");
  {
    ChildProcesses c;
    ASSERT_TRUE(c.Start(Shell("sleeper", "echo $$ > " + pidfile + "; exec sleep 60")).ok());
    ASSERT_GT(ReadPid(pidfile), 0);
  }
  EXPECT_TRUE(GoneSoon(ReadPid(pidfile)));
}

TEST(RunCommand, OutputOrAnErrorThatSaysWhatFailed) {
  EXPECT_EQ(*RunCommand({"echo", "hello"}), "hello\n");
  auto failed = RunCommand({"/bin/sh", "-c", "echo oops >&2; exit 2"});
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(failed.status().message(),
            "`/bin/sh -c echo oops >&2; exit 2` failed (exit code 2): oops");
  EXPECT_EQ(RunCommand({"no-such-program-herd"}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  const auto start = Clock::now();
  auto slow = RunCommand({"sleep", "30"}, Deadline::After(std::chrono::milliseconds(200)));
  EXPECT_EQ(slow.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5.0);
}

}  // namespace
}  // namespace herd
