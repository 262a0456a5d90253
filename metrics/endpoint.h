#pragma once
// The Prometheus endpoint of a process (`--metrics-listen HOST:PORT` on every role): serves
// the process registry (registry.h) in Prometheus' text format (prometheus-cpp's
// TextSerializer) at http://HOST:PORT/metrics, until destroyed.
//
// The HTTP side is a minimal HTTP/1.x server of our own on one thread (a scrape is one small
// request every few seconds; requests are answered one at a time, each within a deadline,
// then the connection is closed). Not prometheus-cpp's Exposer: its embedded civetweb runs
// handlers on threads with a fixed 100 KB stack, from which glibc also carves the static TLS
// of every loaded library; in `herd` (libtorch, glog, NCCL) too little is left and a scrape
// overflows it.
//
// HOST is an IP address (127.0.0.1, 0.0.0.0, [::1]) or `localhost`; PORT 0 picks a free port,
// which port() tells. Errors are INVALID_ARGUMENT for a malformed address and UNAVAILABLE for
// one that cannot be bound (in use, not an address of this machine), naming the address.

#include <memory>
#include <string>

#include "absl/status/statusor.h"

#include <atomic>
#include <thread>

namespace herd::metrics {

class Endpoint {
 public:
  static absl::StatusOr<std::unique_ptr<Endpoint>> Start(const std::string& listen);
  ~Endpoint();

  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  int port() const { return port_; }
  // http://HOST:PORT/metrics, with the port that was bound.
  std::string url() const;

 private:
  Endpoint(int listen_fd, std::string host, int port);
  void Serve();
  void Answer(int fd);

  const int listen_fd_;
  const std::string host_;
  const int port_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// The process's endpoint: Start, kept until the process exits (never destroyed, so no exit
// path waits for its thread). What a role calls for --metrics-listen; a second call is
// FAILED_PRECONDITION naming the first address.
absl::StatusOr<const Endpoint*> StartProcessEndpoint(const std::string& listen);

// Checks "HOST:PORT" as Start takes it; returns the address in the form the HTTP server binds
// ("127.0.0.1:9100", "[::1]:0": `localhost` becomes 127.0.0.1).
absl::StatusOr<std::string> ParseListenAddress(const std::string& listen);

}  // namespace herd::metrics
