#include "metrics/endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <prometheus/text_serializer.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "metrics/registry.h"

namespace herd::metrics {
namespace {

constexpr auto kRequestDeadline = std::chrono::seconds(5);
constexpr size_t kMaxRequestHead = 16 << 10;

absl::Status BadAddress(const std::string& listen, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "--metrics-listen '%s': %s (write HOST:PORT with HOST an IP address or localhost, e.g. "
      "127.0.0.1:9100; port 0 picks a free one)",
      listen, why));
}

}  // namespace

absl::StatusOr<std::string> ParseListenAddress(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0) return BadAddress(listen, "no HOST:PORT");
  std::string host = listen.substr(0, colon);
  int port = -1;
  if (!absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return BadAddress(listen, "the port is not a number from 0 to 65535");
  }
  if (host == "localhost") host = "127.0.0.1";
  // The HTTP server binds addresses, not names: check the host is one.
  unsigned char buf[sizeof(in6_addr)];
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    if (inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), buf) != 1) {
      return BadAddress(listen, "the host is not an IPv6 address");
    }
  } else if (inet_pton(AF_INET, host.c_str(), buf) != 1) {
    return BadAddress(listen, "the host is not an IPv4 address ([...] for IPv6)");
  }
  return absl::StrFormat("%s:%d", host, port);
}

absl::StatusOr<std::unique_ptr<Endpoint>> Endpoint::Start(const std::string& listen) {
  auto address = ParseListenAddress(listen);
  if (!address.ok()) return address.status();
  const size_t colon = address->rfind(':');
  std::string host = address->substr(0, colon);
  const int want = std::stoi(address->substr(colon + 1));
  const bool v6 = host.front() == '[';
  sockaddr_storage storage{};
  socklen_t len = 0;
  if (v6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&storage);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(static_cast<uint16_t>(want));
    inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), &a->sin6_addr);
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&storage);
    a->sin_family = AF_INET;
    a->sin_port = htons(static_cast<uint16_t>(want));
    inet_pton(AF_INET, host.c_str(), &a->sin_addr);
    len = sizeof *a;
  }
  const int fd = ::socket(storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrFormat("--metrics-listen %s: socket: %s", listen, std::strerror(errno)));
  }
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&storage), len) != 0 || ::listen(fd, 16) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &len) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::UnavailableError(
        absl::StrFormat("--metrics-listen %s: cannot serve there: %s", listen, std::strerror(err)));
  }
  const int port = ntohs(v6 ? reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port
                            : reinterpret_cast<sockaddr_in*>(&storage)->sin_port);
  return std::unique_ptr<Endpoint>(new Endpoint(fd, std::move(host), port));
}

Endpoint::Endpoint(int listen_fd, std::string host, int port)
    : listen_fd_(listen_fd), host_(std::move(host)), port_(port), thread_([this] { Serve(); }) {}

Endpoint::~Endpoint() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  thread_.join();
  ::close(listen_fd_);
}

void Endpoint::Serve() {
  while (!stopping_.load()) {
    // Polled with a timeout so the destructor's flag is seen even where shutdown() does not
    // wake accept().
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    Answer(fd);
    ::close(fd);
  }
}

// Reads the request head (within a deadline: a client that sends nothing cannot hold the one
// thread) and answers GET /metrics with the registry's text; anything else with 404 or 405.
void Endpoint::Answer(int fd) {
  const auto deadline = std::chrono::steady_clock::now() + kRequestDeadline;
  std::string head;
  char buf[2048];
  while (head.find("\r\n\r\n") == std::string::npos && head.find("\n\n") == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return;
    head.append(buf, static_cast<size_t>(n));
    if (head.size() > kMaxRequestHead) return;  // not a scrape
  }
  // "GET /metrics?x HTTP/1.1"
  const size_t sp1 = head.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? sp1 : head.find(' ', sp1 + 1);
  const std::string method = head.substr(0, sp1);
  std::string target = sp2 == std::string::npos ? "" : head.substr(sp1 + 1, sp2 - sp1 - 1);
  target = target.substr(0, target.find('?'));
  int status = 200;
  std::string reason = "OK", type = "text/plain; version=0.0.4; charset=utf-8", body;
  if (method != "GET" && method != "HEAD") {
    status = 405, reason = "Method Not Allowed", type = "text/plain", body = "GET /metrics\n";
  } else if (target != "/metrics") {
    status = 404, reason = "Not Found", type = "text/plain", body = "GET /metrics\n";
  } else {
    body = prometheus::TextSerializer().Serialize(SharedRegistry()->Collect());
  }
  std::string answer = absl::StrFormat(
      "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n",
      status, reason, type, body.size());
  if (method != "HEAD") answer += body;
  size_t sent = 0;
  while (sent < answer.size() && std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = ::send(fd, answer.data() + sent, answer.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

absl::StatusOr<const Endpoint*> StartProcessEndpoint(const std::string& listen) {
  static std::mutex mu;
  static Endpoint* started = nullptr;  // never destroyed: see the header
  std::lock_guard<std::mutex> lock(mu);
  if (started != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrFormat("--metrics-listen %s: this process already serves its metrics at %s",
                        listen, started->url()));
  }
  auto endpoint = Endpoint::Start(listen);
  if (!endpoint.ok()) return endpoint.status();
  started = endpoint->release();
  return started;
}

std::string Endpoint::url() const {
  return absl::StrFormat("http://%s:%d/metrics", host_ == "0.0.0.0" ? "127.0.0.1" : host_, port_);
}

}  // namespace herd::metrics
