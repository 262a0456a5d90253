// Supervising a set of processes that must all succeed: output lines, failures, hangs, and that no
// process outlives Supervise.

#include "common/supervise.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include "absl/strings/str_format.h"
#include "common/deadline.h"
#include "tests/unit/common/process_test_util.h"

namespace herd {
namespace {

using testing::Alive;
using testing::GoneSoon;
using testing::ReadPid;
using testing::Shell;
using testing::TempPath;

TEST(Supervise, DeliversStdoutLinesAndExitCodes) {
  std::vector<std::string> lines;
  SuperviseOptions options;
  options.on_stdout_line = [&](size_t child, std::string_view line) {
    lines.push_back(absl::StrFormat("%d:%s", child, std::string(line)));
  };
  options.on_stderr_line = [](size_t, std::string_view) {};
  auto outcome = Supervise(
      {Shell("a", "echo one; echo two; printf tail"), Shell("b", "echo x=$HERD_X")}, options);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_TRUE(outcome->ok()) << outcome->Describe();
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"0:one", "0:tail", "0:two", "1:x="}));
}

TEST(Supervise, EnvironmentIsAdded) {
  std::string seen;
  SuperviseOptions options;
  options.on_stdout_line = [&](size_t, std::string_view line) { seen = std::string(line); };
  ChildSpec c = Shell("env", "echo $HERD_TEST_VALUE");
  c.env = {"HERD_TEST_VALUE=42"};
  auto outcome = Supervise({c}, options);
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(seen, "42");
}

TEST(Supervise, TheReasonSkipsBacktraceFrames) {
  SuperviseOptions options;
  options.on_stderr_line = [](size_t, std::string_view) {};
  auto outcome =
      Supervise({Shell("herd rank 3",
                       "echo 'ucp_request.c:180  Assertion failed' >&2; "
                       "echo '==== backtrace (tid: 7) ====' >&2; "
                       "echo ' 0  /lib/libucs.so.0(ucs_handle_error+0x2dc) [0x7f]' >&2; "
                       "echo '12  /bin/herd(+0xd00c1) [0x55]' >&2; echo '=====' >&2; exit 6")},
                options);
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(outcome->Describe(),
            "herd rank 3 failed first: exited with code 6: ucp_request.c:180  Assertion failed");
}

TEST(Supervise, AFailureKillsTheOthersAfterTheGraceAndIsNamed) {
  const std::string pidfile = TempPath("sleeper");
  SuperviseOptions options;
  options.failure_grace = std::chrono::milliseconds(200);
  options.on_stderr_line = [](size_t, std::string_view) {};
  const auto start = Clock::now();
  auto outcome =
      Supervise({Shell("herd rank 0", "echo $$ > " + pidfile + "; exec sleep 60"),
                 Shell("herd rank 1", "sleep 0.2; echo 'rank 1: lost rank 7' >&2; exit 3")},
                options);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_FALSE(outcome->ok());
  EXPECT_LT(seconds, 10.0);
  EXPECT_EQ(outcome->first_failure, 1);
  EXPECT_EQ(outcome->children[1].exit_code, 3);
  EXPECT_TRUE(outcome->children[0].killed_by_us);
  const std::string why = outcome->Describe();
  EXPECT_NE(why.find("herd rank 1 failed first: exited with code 3: rank 1: lost rank 7"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("killed: herd rank 0"), std::string::npos) << why;
  const pid_t sleeper = ReadPid(pidfile);
  ASSERT_GT(sleeper, 0);
  EXPECT_TRUE(GoneSoon(sleeper));
}

TEST(Supervise, SilenceIsAHangAndGrandchildrenGoToo) {
  const std::string pidfile = TempPath("grandchild");
  SuperviseOptions options;
  options.silence_timeout = std::chrono::milliseconds(300);
  // The child starts a grandchild in the background (like mpirun's ranks), then hangs.
  auto outcome = Supervise(
      {Shell("mpirun", "sleep 60 & echo $! > " + pidfile + "; echo started; wait")}, options);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_TRUE(outcome->silent_too_long);
  EXPECT_NE(outcome->Describe().find("no output from any process"), std::string::npos);
  EXPECT_TRUE(outcome->children[0].killed_by_us);
  const pid_t grandchild = ReadPid(pidfile);
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(GoneSoon(grandchild));
}

TEST(Supervise, AChildThatIgnoresSigtermIsKilled) {
  SuperviseOptions options;
  options.silence_timeout = std::chrono::milliseconds(200);
  const auto start = Clock::now();
  auto outcome =
      Supervise({Shell("stubborn", "trap '' TERM; while :; do sleep 0.05; done")}, options);
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(outcome->children[0].term_signal, SIGKILL);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 10.0);
}

TEST(Supervise, AProgramThatCannotRunIsReported) {
  SuperviseOptions options;
  options.on_stderr_line = [](size_t, std::string_view) {};
  auto outcome =
      Supervise({ChildSpec{.name = "peer", .argv = {"/nonexistent/herd-bench-x"}}}, options);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->children[0].exit_code, 127);
  EXPECT_NE(outcome->Describe().find("cannot execute /nonexistent/herd-bench-x"), std::string::npos)
      << outcome->Describe();
}

TEST(Supervise, ChildrenRunInTheirOwnProcessGroup) {
  std::string group;
  SuperviseOptions options;
  options.on_stdout_line = [&](size_t, std::string_view line) { group = std::string(line); };
  auto outcome = Supervise({Shell("g", "ps -o pgid= -p $$ | tr -d ' '")}, options);
  ASSERT_TRUE(outcome.ok());
  ASSERT_FALSE(group.empty());
  EXPECT_NE(std::stoi(group), getpgrp());
}

}  // namespace
}  // namespace herd
