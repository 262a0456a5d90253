// herd_bootstrap_load: the store traffic of building a communicator of N ranks against a real
// `herd scheduler` (bench/control_plane/bootstrap_load.h), one JSON line per N and protocol:
//
//   herd_bootstrap_load --ranks 64,256,1024,4096 --protocol get_many,per_peer_get
//                       [--read-ranks 64] [--threads 16] [--channels 4]
//
// Without --scheduler it starts `herd scheduler` (the `herd` next to this executable, or
// --herd PATH) on 127.0.0.1 with a fresh state for every measurement, so it can read the
// scheduler's CPU from /proc; with --scheduler ADDR [--scheduler-pid PID] it uses that one.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "bench/control_plane/bootstrap_load.h"

namespace herd::bench {
namespace {

namespace fs = std::filesystem;

// A `herd scheduler` child on 127.0.0.1 with its state in a fresh directory.
class SchedulerChild {
 public:
  ~SchedulerChild() { Stop(); }

  bool Start(const std::string& herd) {
    dir_ = fs::temp_directory_path() / absl::StrFormat("herd-bootload-%d-%d", ::getpid(), n_++);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const std::string port_file = (dir_ / "port").string();
    const std::string log = (dir_ / "log").string();
    pid_ = ::fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      FILE* out = std::fopen(log.c_str(), "w");
      if (out != nullptr) {
        ::dup2(::fileno(out), 1);
        ::dup2(::fileno(out), 2);
      }
      const std::string state = (dir_ / "state").string();
      ::execl(herd.c_str(), herd.c_str(), "scheduler", "--listen", "127.0.0.1:0", "--state",
              state.c_str(), "--port-file", port_file.c_str(), "--heartbeat-timeout", "600s",
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 1000; ++i) {
      std::ifstream in(port_file);
      int port = 0;
      if (in >> port && port > 0) {
        address_ = absl::StrFormat("127.0.0.1:%d", port);
        return true;
      }
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  void Stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
    }
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  pid_t pid() const { return pid_; }
  const std::string& address() const { return address_; }

 private:
  static inline int n_ = 0;
  pid_t pid_ = -1;
  fs::path dir_;
  std::string address_;
};

int Main(int argc, char** argv) {
  CLI::App app{"The store traffic of building a communicator against a real herd scheduler"};
  std::vector<int> ranks{64, 256, 1024, 4096};
  std::vector<std::string> protocols{"get_many", "per_peer_get"};
  BootstrapLoadOptions base;
  std::string herd;
  int sample = 0;
  app.add_option("--ranks", ranks, "communicator sizes")->delimiter(',');
  app.add_option("--protocol", protocols, "get_many (today), per_peer_get (before)")
      ->delimiter(',')
      ->check(CLI::IsMember({"get_many", "per_peer_get"}));
  app.add_option("--read-ranks", sample,
                 "per_peer_get: at most this many ranks read (their CPU scaled to all); 0: all");
  app.add_option("--threads", base.client_threads, "simulated ranks in flight");
  app.add_option("--channels", base.channels, "gRPC channels they share");
  app.add_option("--record-bytes", base.record_bytes, "bytes of one rank's record");
  app.add_option("--scheduler", base.scheduler_address, "use this scheduler (host:port)");
  app.add_option("--scheduler-pid", base.scheduler_pid, "its pid, to read its CPU");
  app.add_option("--herd", herd, "the herd binary to start schedulers with");
  CLI11_PARSE(app, argc, argv);
  if (herd.empty()) herd = (fs::read_symlink("/proc/self/exe").parent_path() / "herd").string();

  for (const std::string& name : protocols) {
    for (int n : ranks) {
      BootstrapLoadOptions o = base;
      o.ranks = n;
      o.protocol =
          name == "get_many" ? BootstrapProtocol::kGetMany : BootstrapProtocol::kPerPeerGet;
      o.read_ranks = o.protocol == BootstrapProtocol::kPerPeerGet ? sample : 0;
      SchedulerChild child;
      if (o.scheduler_address.empty()) {
        if (!child.Start(herd)) {
          std::fprintf(stderr, "cannot start %s scheduler\n", herd.c_str());
          return 1;
        }
        o.scheduler_address = child.address();
        o.scheduler_pid = child.pid();
      }
      auto result = BootstrapLoad(o);
      if (!result.ok()) {
        std::fprintf(stderr, "%d ranks, %s: %s\n", n, name.c_str(),
                     result.status().ToString().c_str());
        return 1;
      }
      std::printf("%s\n", BootstrapLoadJson(*result).c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace herd::bench

int main(int argc, char** argv) { return herd::bench::Main(argc, argv); }
