// The real `herd` binary end to end: `herd bench collectives` with herd's UCX ranks (and the
// MPI and Gloo peers where they run here), its JSON lines, its exit codes, and that it leaves
// no process behind when interrupted.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/result.h"
#include "common/supervise.h"

#ifndef HERD_BINARY
#error "HERD_BINARY must name the herd executable"
#endif

namespace herd::bench {
namespace {

struct Ran {
  int exit_code = -1;
  std::vector<std::string> out;
  std::vector<std::string> err;
  std::string Dump() const {
    return absl::StrFormat("exit %d\nstdout:\n%s\nstderr:\n%s", exit_code, absl::StrJoin(out, "\n"),
                           absl::StrJoin(err, "\n"));
  }
};

Ran Herd(std::vector<std::string> args, std::vector<std::string> env = {}) {
  args.insert(args.begin(), HERD_BINARY);
  Ran ran;
  SuperviseOptions options;
  options.silence_timeout = std::chrono::seconds(90);
  options.on_stdout_line = [&](size_t, std::string_view l) { ran.out.emplace_back(l); };
  options.on_stderr_line = [&](size_t, std::string_view l) { ran.err.emplace_back(l); };
  auto outcome = Supervise({ChildSpec{.name = "herd", .argv = args, .env = env}}, options);
  EXPECT_TRUE(outcome.ok()) << outcome.status();
  if (outcome.ok()) ran.exit_code = outcome->children[0].exit_code;
  return ran;
}

std::vector<BenchResult> ParseAll(const Ran& ran) {
  std::vector<BenchResult> results;
  for (const std::string& line : ran.out) {
    auto r = ParseResultLine(line);
    EXPECT_TRUE(r.ok()) << "stdout line is not a result: " << line << "\n" << r.status();
    if (r.ok()) results.push_back(*r);
  }
  return results;
}

TEST(HerdBenchCli, TwoRanksCheckedJsonWithoutPeers) {
  const Ran ran = Herd({"bench", "collectives", "--ranks", "2", "--sizes", "4K,64K", "--check",
                        "--json", "--peers", "none", "--iters", "5", "--timeout-s", "30"});
  ASSERT_EQ(ran.exit_code, 0) << ran.Dump();
  const auto results = ParseAll(ran);
  // Default ops: allreduce, reduce_scatter, allgather; two sizes each.
  ASSERT_EQ(results.size(), 6u) << ran.Dump();
  for (const BenchResult& r : results) {
    EXPECT_EQ(r.impl, "herd");
    EXPECT_EQ(r.algo, "auto");
    EXPECT_EQ(r.ranks, 2);
    EXPECT_EQ(r.dtype, "fp32");
    EXPECT_EQ(r.iters, 5);
    EXPECT_EQ(r.check, kCheckOk) << r.detail;
    EXPECT_TRUE(r.bytes == 4096 || r.bytes == 65536);
    EXPECT_GT(r.time_us, 0);
    EXPECT_GT(r.algbw_gbps, 0);
  }
}

TEST(HerdBenchCli, BadFlagsExitWithTwoAndPrintNothingOnStdout) {
  for (std::vector<std::string> args : {
           std::vector<std::string>{"--sizes", "4Q"},
           {"--ranks", "0"},
           {"--peers", "nccl"},
           {"--ops", "allreduce", "--algos", "bruck"},
           {"--dtype", "int8"},
           {"--no-such-flag"},
       }) {
    args.insert(args.begin(), {"bench", "collectives"});
    const Ran ran = Herd(args);
    EXPECT_EQ(ran.exit_code, 2) << absl::StrJoin(args, " ") << "\n" << ran.Dump();
    EXPECT_TRUE(ran.out.empty()) << ran.Dump();
    EXPECT_FALSE(ran.err.empty());
  }
  EXPECT_EQ(Herd({"frobnicate"}).exit_code, 2);
}

TEST(HerdBenchCli, HelpAndVersion) {
  Ran ran = Herd({"--help"});
  EXPECT_EQ(ran.exit_code, 0);
  EXPECT_NE(absl::StrJoin(ran.out, "\n").find("bench"), std::string::npos) << ran.Dump();
  ran = Herd({"--version"});
  EXPECT_EQ(ran.exit_code, 0);
  ASSERT_FALSE(ran.out.empty());
  EXPECT_EQ(ran.out[0].rfind("herd ", 0), 0u) << ran.Dump();
  ran = Herd({"bench", "collectives", "--help"});
  EXPECT_EQ(ran.exit_code, 0);
  EXPECT_NE(absl::StrJoin(ran.out, "\n").find("rounded down to whole elements"), std::string::npos);
}

// The peers run only where their launcher works; the reason is given when skipped.
std::string MpiUnavailable() {
  const std::string exe =
      std::filesystem::path(HERD_BINARY).parent_path().string() + "/herd-bench-mpi";
  if (access(exe.c_str(), X_OK) != 0) return exe + " is not built";
  Ran ran;
  SuperviseOptions options;
  options.silence_timeout = std::chrono::seconds(30);
  options.on_stderr_line = [&](size_t, std::string_view l) { ran.err.emplace_back(l); };
  auto outcome =
      Supervise({ChildSpec{.name = "mpirun",
                           .argv = {"mpirun", "-np", "1", "--oversubscribe", "true"},
                           .env = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"},
                           .death_signal = SIGTERM}},
                options);
  if (!outcome.ok() || !outcome->ok()) {
    return "mpirun -np 1 true fails here: " + (outcome.ok() ? outcome->Describe() : "");
  }
  return "";
}

TEST(HerdBenchCli, MpiPeerAtATinySize) {
  if (const std::string why = MpiUnavailable(); !why.empty()) GTEST_SKIP() << why;
  const Ran ran =
      Herd({"bench", "collectives", "--ranks", "2", "--ops", "allreduce,allgather", "--sizes", "4K",
            "--check", "--json", "--peers", "mpi", "--iters", "3", "--timeout-s", "30"});
  ASSERT_EQ(ran.exit_code, 0) << ran.Dump();
  int mpi = 0;
  for (const BenchResult& r : ParseAll(ran)) {
    EXPECT_EQ(r.check, kCheckOk) << r.impl << " " << r.op << ": " << r.detail;
    if (r.impl != "mpi") continue;
    ++mpi;
    EXPECT_TRUE(r.algo == "MPI_Allreduce" || r.algo == "MPI_Allgather") << r.algo;
    EXPECT_TRUE(r.measured());
  }
  EXPECT_EQ(mpi, 2) << ran.Dump();
}

TEST(HerdBenchCli, GlooPeerAtATinySize) {
  const std::string exe =
      std::filesystem::path(HERD_BINARY).parent_path().string() + "/herd-bench-gloo";
  if (access(exe.c_str(), X_OK) != 0) GTEST_SKIP() << exe << " is not built";
  const Ran ran =
      Herd({"bench", "collectives", "--ranks", "2", "--ops", "allreduce,reduce_scatter", "--sizes",
            "4K", "--check", "--json", "--peers", "gloo", "--iters", "3", "--timeout-s", "30"});
  ASSERT_EQ(ran.exit_code, 0) << ran.Dump();
  int gloo = 0;
  for (const BenchResult& r : ParseAll(ran)) {
    EXPECT_EQ(r.check, kCheckOk) << r.impl << " " << r.op << ": " << r.detail;
    gloo += r.impl == "gloo";
  }
  EXPECT_EQ(gloo, 2) << ran.Dump();
}

// Every process whose command line mentions `marker`.
std::vector<pid_t> ProcessesMentioning(const std::string& marker) {
  std::vector<pid_t> found;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmdline.find(marker) != std::string::npos) found.push_back(std::stoi(name));
  }
  return found;
}

TEST(HerdBenchCli, CtrlCStopsEveryRankAndExitsWith130) {
  // A private TMPDIR puts a marker into every rank's command line (its store path).
  const std::string tmp = absl::StrFormat("%s/herd-ctrlc-%d", ::testing::TempDir(), getpid());
  std::filesystem::create_directories(tmp);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("TMPDIR", tmp.c_str(), 1);
    const int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(devnull, 2);
    execl(HERD_BINARY, HERD_BINARY, "bench", "collectives", "--ranks", "2", "--sizes", "4K",
          "--iters", "100000", "--peers", "none", "--ops", "allreduce", nullptr);
    _exit(127);
  }
  // Wait until the ranks are up, then interrupt the driver as a terminal would.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (ProcessesMentioning(tmp).size() < 2 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GE(ProcessesMentioning(tmp).size(), 2u) << "the ranks never started";
  kill(pid, SIGINT);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGINT);
  EXPECT_TRUE(ProcessesMentioning(tmp).empty());
  // The temp directory of the stores is gone too.
  EXPECT_TRUE(std::filesystem::is_empty(tmp));
  std::filesystem::remove_all(tmp);
}

}  // namespace
}  // namespace herd::bench
