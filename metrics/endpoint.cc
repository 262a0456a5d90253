#include "metrics/endpoint.h"

#include <arpa/inet.h>
#include <prometheus/exposer.h>

#include <exception>
#include <mutex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "metrics/registry.h"

namespace herd::metrics {
namespace {

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
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(*address, /*num_threads=*/2);
  } catch (const std::exception& e) {
    // civetweb throws when it cannot bind (address in use, not local).
    return absl::UnavailableError(
        absl::StrFormat("--metrics-listen %s: cannot serve there: %s", listen, e.what()));
  }
  const std::vector<int> ports = exposer->GetListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError(
        absl::StrFormat("--metrics-listen %s: the HTTP server bound no port", listen));
  }
  exposer->RegisterCollectable(SharedRegistry());
  const std::string host = address->substr(0, address->rfind(':'));
  return std::unique_ptr<Endpoint>(new Endpoint(std::move(exposer), host, ports.front()));
}

Endpoint::Endpoint(std::unique_ptr<prometheus::Exposer> exposer, std::string host, int port)
    : exposer_(std::move(exposer)), host_(std::move(host)), port_(port) {}

Endpoint::~Endpoint() = default;

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
