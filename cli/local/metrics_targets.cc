#include "cli/local/metrics_targets.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/str_format.h"
#include "common/json.h"

namespace herd::cli {

namespace {

// The lowest port the kernel hands out for bind(0) and for outgoing connections
// (/proc/sys/net/ipv4/ip_local_port_range); 32768 when it cannot be read.
int EphemeralPortsFrom() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  return in >> low && low > 0 ? low : 32768;
}

// Binds `fd` to 127.0.0.1:port (0: one the kernel picks); the port bound, or -1.
int BindLoopback(int fd, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return -1;
  }
  return ntohs(addr.sin_port);
}

}  // namespace

absl::StatusOr<std::vector<int>> FreeLoopbackPorts(int count) {
  // The ports come from below the kernel's ephemeral range, tried from a random start: a port
  // of that range that is free now can be taken by any outgoing connection (gRPC, UCX) before
  // the child binds it, and bind(0) hands a port just closed out again (two processes of one
  // job were once given the same one). Every socket stays bound until all are picked, so the
  // ports of one call are distinct. Where the range starts too low for that, bind(0).
  constexpr int kLowest = 10000;
  const int below = EphemeralPortsFrom();
  const int span = below - kLowest;
  int next = span > 0 ? kLowest + static_cast<int>(std::random_device{}() % span) : 0;
  int tried = 0;
  std::vector<int> fds;
  std::vector<int> ports;
  absl::Status status;
  while (static_cast<int>(ports.size()) < count) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      status = absl::InternalError(absl::StrFormat("socket: %s", std::strerror(errno)));
      break;
    }
    fds.push_back(fd);
    int port = -1;
    if (span <= 0) {
      port = BindLoopback(fd, 0);
    } else {
      for (; port < 0 && tried < span; ++tried) {
        port = BindLoopback(fd, next);
        next = next + 1 < below ? next + 1 : kLowest;
      }
    }
    if (port < 0) {
      status = absl::UnavailableError(
          absl::StrFormat("no free port on 127.0.0.1 for metrics (tried %d below %d): %s", tried,
                          below, std::strerror(errno)));
      break;
    }
    ports.push_back(port);
  }
  for (const int fd : fds) ::close(fd);
  if (!status.ok()) return status;
  return ports;
}

absl::Status WriteMetricsTargets(const std::string& path, const std::string& job,
                                 const std::vector<MetricsTarget>& targets) {
  json::Array groups;
  for (const MetricsTarget& t : targets) {
    json::Object labels;
    labels.Add("role", t.role).Add("process", t.process).Add("herd_job", job);
    json::Object group;
    group.Add("targets", json::Array{json::Value(absl::StrFormat("127.0.0.1:%d", t.port))})
        .Add("labels", std::move(labels));
    groups.push_back(std::move(group));
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << json::Value(std::move(groups)).Write() << "\n";
    if (!out.flush()) {
      return absl::InternalError(absl::StrFormat("cannot write %s", tmp));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return absl::InternalError(absl::StrFormat("cannot write %s: %s", path, ec.message()));
  return absl::OkStatus();
}

}  // namespace herd::cli
