#include "tests/support/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

namespace herd::testing {

absl::StatusOr<HttpResponse> HttpGet(const std::string& host, int port, const std::string& target,
                                     int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto left_ms = [&] {
    return static_cast<int>(std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                 std::chrono::steady_clock::now())
               .count()));
  };
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError("not an IPv4 address: " + host);
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return absl::UnavailableError(
        absl::StrFormat("connect %s:%d: %s", host, port, std::strerror(errno)));
  }
  const std::string request = absl::StrFormat(
      "GET %s HTTP/1.0\r\nHost: %s:%d\r\nConnection: close\r\n\r\n", target, host, port);
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    return absl::UnavailableError(absl::StrFormat("send to %s:%d failed", host, port));
  }
  std::string raw;
  char buf[16384];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, left_ms());
    if (ready == 0) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "GET %s from %s:%d: no complete answer within %d ms", target, host, port, timeout_ms));
    }
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::UnavailableError(std::strerror(errno));
    if (n == 0) break;
    raw.append(buf, static_cast<size_t>(n));
  }
  // "HTTP/1.1 200 OK\r\n...\r\n\r\nbody"
  const size_t space = raw.find(' ');
  const size_t end = raw.find("\r\n\r\n");
  HttpResponse out;
  if (space == std::string::npos || end == std::string::npos ||
      !absl::SimpleAtoi(raw.substr(space + 1, 3), &out.status)) {
    return absl::DataLossError("not an HTTP response: " + raw.substr(0, 200));
  }
  out.body = raw.substr(end + 4);
  return out;
}

}  // namespace herd::testing
