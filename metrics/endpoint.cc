#include "metrics/endpoint.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <prometheus/text_serializer.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "metrics/registry.h"

namespace herd::metrics {
namespace {

absl::Status BadAddress(const std::string& listen, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "--metrics-listen '%s': %s (write HOST:PORT with HOST an IP address or localhost, e.g. "
      "127.0.0.1:9100; port 0 picks a free one)",
      listen, why));
}

constexpr char kHelp[] = "GET /metrics\n";

MHD_Result Queue(MHD_Connection* connection, unsigned status, const std::string& type,
                 const std::string& body) {
  MHD_Response* r = MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()),
                                                    MHD_RESPMEM_MUST_COPY);
  if (r == nullptr) return MHD_NO;
  MHD_add_response_header(r, "Content-Type", type.c_str());
  // As before: one request per connection. A scraper opens the next one (cheap on loopback,
  // and it keeps no idle connection holding a slot between scrapes).
  MHD_add_response_header(r, "Connection", "close");
  if (status == MHD_HTTP_METHOD_NOT_ALLOWED) MHD_add_response_header(r, "Allow", "GET, HEAD");
  const MHD_Result q = MHD_queue_response(connection, status, r);
  MHD_destroy_response(r);
  return q;
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

// The daemon's callbacks, with the endpoint as their closure. All run on the endpoint's
// thread (MHD without a thread of its own: Serve() drives it), as does Sweep(), so the clocks
// need no lock.
struct Endpoint::Callbacks {
  static void Notify(void* cls, MHD_Connection* c, void** socket_context,
                     MHD_ConnectionNotificationCode toe) {
    auto* self = static_cast<Endpoint*>(cls);
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
      const MHD_ConnectionInfo* info =
          MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
      self->clocks_[c] = Clock{std::chrono::steady_clock::now(), info ? info->connect_fd : -1};
      *socket_context = c;
    } else {
      self->clocks_.erase(c);
    }
  }
  // Called once the request head is in (MHD reads and bounds it), then again for any body.
  static MHD_Result Answer(void* cls, MHD_Connection* c, const char* url, const char* method,
                           const char* /*version*/, const char* /*upload*/, size_t* upload_size,
                           void** request) {
    auto* self = static_cast<Endpoint*>(cls);
    if (auto it = self->clocks_.find(c); it != self->clocks_.end()) it->second.head_done = true;
    if (*request != nullptr) {  // a body after a refusal already queued: dropped
      *upload_size = 0;
      return MHD_YES;
    }
    *request = self;
    const std::string m = method == nullptr ? "" : method;
    if (m != "GET" && m != "HEAD") {
      return Queue(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", kHelp);
    }
    if (url == nullptr || std::string(url) != "/metrics") {
      return Queue(c, MHD_HTTP_NOT_FOUND, "text/plain", kHelp);
    }
    // MHD leaves the body out of a HEAD answer and keeps its Content-Length.
    UpdateUptime();
    return Queue(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8",
                 prometheus::TextSerializer().Serialize(SharedRegistry()->Collect()));
  }
  static void Log(void* /*cls*/, const char* fmt, va_list ap) {
    char line[512];
    std::vsnprintf(line, sizeof line, fmt, ap);
    std::string text = line;
    while (!text.empty() && text.back() == '\n') text.pop_back();
    herd::Log().debug("metrics endpoint: {}", text);
  }
};

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
  const int fd = ::socket(storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrFormat("--metrics-listen %s: socket: %s", listen, std::strerror(errno)));
  }
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&storage), len) != 0 || ::listen(fd, 128) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &len) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::UnavailableError(
        absl::StrFormat("--metrics-listen %s: cannot serve there: %s", listen, std::strerror(err)));
  }
  const int port = ntohs(v6 ? reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port
                            : reinterpret_cast<sockaddr_in*>(&storage)->sin_port);
  std::unique_ptr<Endpoint> e(new Endpoint(std::move(host), port));
  // MHD without a thread of its own (Serve() runs it), over epoll, on the socket bound above
  // (it closes it when stopped).
  e->daemon_ = MHD_start_daemon(
      MHD_USE_EPOLL | MHD_USE_ERROR_LOG | (v6 ? MHD_USE_IPv6 : 0), 0, nullptr, nullptr,
      &Callbacks::Answer, e.get(), MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
      static_cast<unsigned>(kMaxConnections), MHD_OPTION_CONNECTION_TIMEOUT,
      static_cast<unsigned>(kIdleTimeout.count()), MHD_OPTION_CONNECTION_MEMORY_LIMIT,
      static_cast<size_t>(kMaxRequestHeadBytes), MHD_OPTION_NOTIFY_CONNECTION, &Callbacks::Notify,
      e.get(), MHD_OPTION_EXTERNAL_LOGGER, &Callbacks::Log, nullptr, MHD_OPTION_END);
  if (e->daemon_ == nullptr) {
    ::close(fd);
    return absl::UnavailableError(absl::StrFormat(
        "--metrics-listen %s: the HTTP server (libmicrohttpd) did not start", listen));
  }
  e->thread_ = std::thread([raw = e.get()] { raw->Serve(); });
  return e;
}

Endpoint::Endpoint(std::string host, int port) : host_(std::move(host)), port_(port) {}

Endpoint::~Endpoint() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
}

void Endpoint::Serve() {
  while (!stopping_.load()) {
    // At most 100 ms per turn, so the destructor's flag and the deadlines are seen in time.
    MHD_run_wait(daemon_, 100);
    // Work MHD has for right away (an answer queued during this turn, a connection to close
    // once it is sent): more turns at once, without waiting.
    MHD_run(daemon_);
    MHD_UNSIGNED_LONG_LONG left = 0;
    for (int i = 0; i < 64 && MHD_get_timeout(daemon_, &left) == MHD_YES && left == 0; ++i) {
      MHD_run(daemon_);
    }
    Sweep();
  }
}

void Endpoint::Sweep() {
  // MHD's own timeout is for silence; these are for a client that keeps talking and never
  // finishes: its request head within kHeadDeadline of the accept, the whole exchange within
  // kConnectionDeadline. Shutting the socket down makes MHD's next turn close the connection
  // (its fd stays open until then: no other socket can take its number meanwhile).
  const auto now = std::chrono::steady_clock::now();
  for (auto& [c, clock] : clocks_) {
    const auto age = now - clock.accepted;
    const bool late = (!clock.head_done && age > kHeadDeadline) || age > kConnectionDeadline;
    if (late && clock.fd >= 0) {
      ::shutdown(clock.fd, SHUT_RDWR);
      clock.fd = -1;  // once
    }
  }
}

absl::StatusOr<const Endpoint*> StartProcessEndpoint(const std::string& listen, Role role) {
  static std::mutex mu;
  static Endpoint* started = nullptr;  // never destroyed: see the header
  std::lock_guard<std::mutex> lock(mu);
  if (started != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrFormat("--metrics-listen %s: this process already serves its metrics at %s",
                        listen, started->url()));
  }
  RegisterProcess(role);
  auto endpoint = Endpoint::Start(listen);
  if (!endpoint.ok()) return endpoint.status();
  started = endpoint->release();
  return started;
}

std::string Endpoint::url() const {
  return absl::StrFormat("http://%s:%d/metrics", host_ == "0.0.0.0" ? "127.0.0.1" : host_, port_);
}

}  // namespace herd::metrics
