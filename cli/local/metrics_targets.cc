#include "cli/local/metrics_targets.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_format.h"
#include "common/json.h"

namespace herd::cli {

absl::StatusOr<std::vector<int>> FreeLoopbackPorts(int count) {
  // Every socket stays bound until all are picked: a port closed at once can be handed out
  // again by the next bind to port 0, and two processes of one job were once given the same one.
  std::vector<int> fds;
  std::vector<int> ports;
  absl::Status status;
  for (int i = 0; i < count && status.ok(); ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      status = absl::InternalError(absl::StrFormat("socket: %s", std::strerror(errno)));
      break;
    }
    fds.push_back(fd);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      status = absl::UnavailableError(
          absl::StrFormat("no free port on 127.0.0.1 for metrics: %s", std::strerror(errno)));
      break;
    }
    ports.push_back(static_cast<int>(ntohs(addr.sin_port)));
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
