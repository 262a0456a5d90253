#pragma once
// The Prometheus endpoint of a process (`--metrics-listen HOST:PORT` on every role): serves
// the process registry (registry.h) as Prometheus' text format at http://HOST:PORT/metrics,
// from prometheus-cpp's embedded HTTP server (two threads of its own), until destroyed.
//
// HOST is an IP address (127.0.0.1, 0.0.0.0, [::1]) or `localhost`; PORT 0 picks a free port,
// which port() tells. Errors are INVALID_ARGUMENT for a malformed address and UNAVAILABLE for
// one that cannot be bound (in use, not an address of this machine), naming the address.

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace prometheus {
class Exposer;
}

namespace herd::metrics {

class Endpoint {
 public:
  static absl::StatusOr<std::unique_ptr<Endpoint>> Start(const std::string& listen);
  ~Endpoint();

  int port() const { return port_; }
  // http://HOST:PORT/metrics, with the port that was bound.
  std::string url() const;

 private:
  Endpoint(std::unique_ptr<prometheus::Exposer> exposer, std::string host, int port);

  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string host_;
  int port_;
};

// The process's endpoint: Start, kept until the process exits and never destroyed (the HTTP
// server's shutdown waits up to two seconds for a connection it just served, which would hold
// up every exit). What a role's command line calls for --metrics-listen; a second call is
// FAILED_PRECONDITION naming the first address.
absl::StatusOr<const Endpoint*> StartProcessEndpoint(const std::string& listen);

// Checks "HOST:PORT" as Start takes it; returns the address in the form the HTTP server binds
// ("127.0.0.1:9100", "[::1]:0": `localhost` becomes 127.0.0.1).
absl::StatusOr<std::string> ParseListenAddress(const std::string& listen);

}  // namespace herd::metrics
