// docs/quickstart.md runs as written. Its fenced blocks marked `sh test` are run in order, in
// one bash (`set -e`), in an empty directory, with the built `herd` first on PATH; a block
// marked `<lang> file=NAME` is written to NAME where it stands; a `text output` block is what
// the `sh test` block before it must print: each of its lines must match a whole line of that
// block's output, in order, where `…` matches any text (a line of `…` alone matches nothing in
// particular). When the page leaves processes running, that fails too.
//
// The page's commands start real processes (herd local, a scheduler, a shard, workers) and
// train for real, on short settings, so the test takes a minute or two.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace herd {
namespace {

namespace fs = std::filesystem;

constexpr char kPage[] = HERD_SOURCE_DIR "/docs/quickstart.md";
constexpr char kMarker[] = "@@herd-quickstart-block ";
constexpr auto kPageDeadline = std::chrono::seconds(420);

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

// One fenced block of the page.
struct Fence {
  int line = 0;      // of the opening fence, 1-based
  std::string info;  // what follows the opening ```
  std::string body;
};

std::vector<Fence> Fences(const std::string& page) {
  std::vector<Fence> fences;
  const std::vector<std::string> lines = Lines(page);
  bool inside = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("```", 0) != 0) {
      if (inside) fences.back().body += lines[i] + "\n";
      continue;
    }
    if (inside) {
      inside = false;
    } else {
      inside = true;
      fences.push_back({static_cast<int>(i + 1), lines[i].substr(3), ""});
    }
  }
  return fences;
}

// A `sh test` block and the output the page promises for it.
struct Step {
  int line = 0;
  std::string script;     // what runs at this point: the block, or a file written
  bool runs = false;      // a `sh test` block (not a file)
  int expected_line = 0;  // of the `text output` block, 0: none
  std::vector<std::string> expected;
};

std::vector<Step> Steps(const std::vector<Fence>& fences) {
  std::vector<Step> steps;
  for (const Fence& f : fences) {
    if (f.info == "sh test") {
      steps.push_back({f.line, f.body, true, 0, {}});
    } else if (f.info == "text output") {
      EXPECT_TRUE(!steps.empty() && steps.back().runs && steps.back().expected_line == 0)
          << "docs/quickstart.md:" << f.line << ": an output block follows no `sh test` block";
      if (steps.empty()) continue;
      steps.back().expected_line = f.line;
      steps.back().expected = Lines(f.body);
    } else if (const size_t at = f.info.find(" file="); at != std::string::npos) {
      const std::string name = f.info.substr(at + 6);
      EXPECT_TRUE(std::regex_match(name, std::regex("[A-Za-z0-9._-]+")))
          << "docs/quickstart.md:" << f.line << ": file name '" << name << "'";
      steps.push_back(
          {f.line,
           "cat > '" + name + "' <<'HERD_QUICKSTART_EOF'\n" + f.body + "HERD_QUICKSTART_EOF\n",
           false,
           0,
           {}});
    }
  }
  return steps;
}

// `line` of an output block as a pattern: literal text, `…` for anything.
std::regex Pattern(const std::string& line) {
  static const std::string kEllipsis = "\u2026";
  std::string re;
  for (size_t i = 0; i < line.size();) {
    if (line.compare(i, kEllipsis.size(), kEllipsis) == 0) {
      re += ".*";
      i += kEllipsis.size();
      continue;
    }
    if (std::string("\\^$.|?*+()[]{}").find(line[i]) != std::string::npos) re += '\\';
    re += line[i++];
  }
  return std::regex(re);
}

// Checks that every expected line matches a line of `output`, in order.
void ExpectOutput(const Step& step, const std::string& output) {
  const std::vector<std::string> got = Lines(output);
  size_t next = 0;
  for (size_t e = 0; e < step.expected.size(); ++e) {
    const std::string& want = step.expected[e];
    if (want.empty() || want == "\u2026") continue;
    const std::regex pattern = Pattern(want);
    size_t i = next;
    while (i < got.size() && !std::regex_match(got[i], pattern)) ++i;
    if (i == got.size()) {
      ADD_FAILURE() << "docs/quickstart.md:" << step.expected_line + 1 + e << ": the block at line "
                    << step.line << " did not print, after what matched before,\n  " << want
                    << "\nIt printed:\n"
                    << output;
      return;
    }
    next = i + 1;
  }
}

// The live processes (not zombies) of process group `pgid`, with their command lines.
std::vector<std::string> GroupMembers(pid_t pgid) {
  std::vector<std::string> members;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string stat = ReadFile((entry.path() / "stat").string());
    const size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size()) continue;
    std::istringstream fields(stat.substr(close + 2));
    std::string state;
    long ppid = 0, pgrp = 0;
    fields >> state >> ppid >> pgrp;
    if (pgrp != pgid || state == "Z") continue;
    std::string cmd = ReadFile((entry.path() / "cmdline").string());
    for (char& c : cmd) {
      if (c == '\0') c = ' ';
    }
    members.push_back(entry.path().filename().string() + ": " + cmd);
  }
  return members;
}

class Quickstart : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "herd-quickstart-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string dir_;
};

TEST_F(Quickstart, ThePageRunsAsWritten) {
  const std::string page = ReadFile(kPage);
  ASSERT_FALSE(page.empty()) << "cannot read " << kPage;
  const std::vector<Step> steps = Steps(Fences(page));
  int runs = 0, checked = 0;
  std::string script = "set -e\n";
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].runs) {
      script += "printf '\\n" + std::string(kMarker) + std::to_string(i) + "@@\\n'\n";
      ++runs;
      checked += steps[i].expected_line != 0;
    }
    script += steps[i].script;
  }
  ASSERT_GE(runs, 8) << "the page's test blocks are marked ```sh test";
  ASSERT_GE(checked, 6) << "the page's outputs are marked ```text output";
  const std::string script_path = dir_ + "/.quickstart.sh";
  const std::string output_path = dir_ + "/.quickstart.out";
  std::ofstream(script_path) << script;

  const std::string bin = fs::path(HERD_BINARY).parent_path().string();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setpgid(0, 0);  // the page's background processes stay in this group
    if (::chdir(dir_.c_str()) != 0) ::_exit(126);
    ::setenv("PATH", (bin + ":" + std::getenv("PATH")).c_str(), 1);
    ::unsetenv("HERD_SCHEDULER");
    FILE* out = std::fopen(output_path.c_str(), "w");
    FILE* in = std::fopen("/dev/null", "r");
    if (out == nullptr || in == nullptr) ::_exit(126);
    ::dup2(::fileno(in), 0);
    ::dup2(::fileno(out), 1);
    ::dup2(::fileno(out), 2);
    ::execl("/bin/bash", "bash", script_path.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + kPageDeadline;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      FAIL() << "the page did not finish within " << kPageDeadline.count() << " s; it printed:\n"
             << ReadFile(output_path);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const std::string output = ReadFile(output_path);

  // The output of each `sh test` block: from its marker to the next.
  std::vector<std::string> outputs(steps.size());
  int reached = -1;
  for (size_t at = output.find(kMarker); at != std::string::npos;) {
    const size_t number = at + std::string(kMarker).size();
    const int step = std::atoi(output.c_str() + number);
    const size_t begin = output.find('\n', number);
    const size_t next = output.find(kMarker, begin);
    outputs[step] =
        output.substr(begin + 1, next == std::string::npos ? std::string::npos : next - begin - 1);
    reached = step;
    at = next;
  }
  const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!ok) {
    ADD_FAILURE() << "docs/quickstart.md:" << (reached >= 0 ? steps[reached].line : 0)
                  << ": the block failed ("
                  << (WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                        : "signal " + std::to_string(WTERMSIG(status)))
                  << "); it printed:\n"
                  << (reached >= 0 ? outputs[reached] : output);
  }
  for (size_t i = 0; ok && i < steps.size(); ++i) {
    if (steps[i].runs && steps[i].expected_line != 0) ExpectOutput(steps[i], outputs[i]);
  }

  // Whatever the page started, it stopped (a reader's terminal would keep it otherwise).
  std::vector<std::string> left = GroupMembers(pid);
  for (int i = 0; i < 30 && !left.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    left = GroupMembers(pid);
  }
  EXPECT_TRUE(left.empty()) << "the page leaves processes running:\n"
                            << testing::PrintToString(left);
  ::kill(-pid, SIGKILL);
}

}  // namespace
}  // namespace herd
