#include "tests/integration/checkpoint/local_runs.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/integration/scheduler/scheduler_process.h"

namespace herd::testing {
namespace fs = std::filesystem;
using scheduler::testing::ReadFile;
using scheduler::testing::RunHerd;
using scheduler::testing::SpawnHerd;

ScratchDir::ScratchDir() {
  std::string tmpl = (fs::temp_directory_path() / "herd-ckpt-test-XXXXXX").string();
  path = ::mkdtemp(tmpl.data());
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  fs::remove_all(path, ec);
}

std::vector<std::string> SmallJob(const std::string& mode, int workers, int64_t samples,
                                  int servers) {
  std::vector<std::string> args = {"local",
                                   "--workers",
                                   std::to_string(workers),
                                   "--mode",
                                   mode,
                                   "--model",
                                   "mlp",
                                   "--epochs",
                                   "1",
                                   "--batch-size",
                                   "32",
                                   "--train-samples",
                                   std::to_string(samples),
                                   "--optimizer",
                                   "momentum",
                                   "--lr",
                                   "0.05"};
  if (servers >= 0) args.insert(args.end(), {"--servers", std::to_string(servers)});
  return args;
}

namespace {

std::vector<std::string> WithOutputs(std::vector<std::string> args, const std::string& dir) {
  args.insert(args.end(), {"--json", "--losses", dir + "/losses.txt", "--state", dir + "/state"});
  return args;
}

std::string JsonString(const std::string& out, const std::string& key) {
  const std::string tag = "\"" + key + "\":\"";
  const size_t at = out.rfind(tag);
  if (at == std::string::npos) return "";
  const size_t from = at + tag.size();
  return out.substr(from, out.find('"', from) - from);
}

}  // namespace

LocalRun RunLocal(std::vector<std::string> args, const std::string& dir) {
  auto r = RunHerd(WithOutputs(std::move(args), dir));
  LocalRun run;
  run.rc = r.rc;
  run.out = r.out;
  run.digest = JsonString(r.out, "params_digest");
  std::istringstream in(ReadFile(dir + "/losses.txt"));
  int64_t it = 0;
  std::string loss;
  while (in >> it >> loss) run.losses[it] = loss;
  return run;
}

std::vector<pid_t> ChildrenOf(pid_t pid) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // pid (comm) state ppid ...: comm may hold spaces, so read after the last ')'.
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    char state = 0;
    pid_t ppid = 0;
    if (rest >> state >> ppid && ppid == pid) out.push_back(std::stoi(name));
  }
  return out;
}

bool RunLocalAndKill(std::vector<std::string> args, const std::string& dir,
                     const std::function<bool()>& ready, std::chrono::seconds patience) {
  const pid_t pid = SpawnHerd(WithOutputs(std::move(args), dir), dir + "/killed.log");
  const auto deadline = std::chrono::steady_clock::now() + patience;
  bool held = false;
  while (std::chrono::steady_clock::now() < deadline) {
    if (ready()) {
      held = true;
      break;
    }
    if (::waitpid(pid, nullptr, WNOHANG) == pid) return false;  // ended on its own
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // The children first: they would hear their parent's death as SIGTERM (a preemption).
  for (pid_t child : ChildrenOf(pid)) ::kill(child, SIGKILL);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return held;
}

std::string Latest(const std::string& dir) {
  std::string id = ReadFile(dir + "/LATEST");
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  return id;
}

}  // namespace herd::testing
