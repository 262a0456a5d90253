#pragma once
// The Prometheus endpoint of a process (`--metrics-listen HOST:PORT` on every role): serves
// the process registry (registry.h) in Prometheus' text format (prometheus-cpp's
// TextSerializer) at http://HOST:PORT/metrics, until destroyed.
//
// The HTTP side is Debian's libmicrohttpd, on one thread of the endpoint's own (MHD drives
// every connection from it over epoll, none waits for another): a scrape is answered at once
// however many clients sit on other connections. Bounds, each a reason: at most
// kMaxConnections connections at once (more wait in the listen queue until one ends: at most
// kHeadDeadline for a client that sends nothing), a request head of at
// most kMaxRequestHeadBytes, which must arrive within kHeadDeadline of the connection
// (whatever the client trickles meanwhile), silence of at most kIdleTimeout, and the whole
// exchange within kConnectionDeadline. One request per connection (the answer closes it).
// Not prometheus-cpp's Exposer: its embedded civetweb runs handlers on threads with a fixed
// 100 KB stack, from which glibc also carves the static TLS of every loaded library; in `herd`
// (libtorch, glog, NCCL) too little is left and a scrape overflows it. The endpoint's thread
// has the default stack.
//
// HOST is an IP address (127.0.0.1, 0.0.0.0, [::1]) or `localhost`; PORT 0 picks a free port,
// which port() tells. Errors are INVALID_ARGUMENT for a malformed address and UNAVAILABLE for
// one that cannot be bound (in use, not an address of this machine), naming the address.

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "metrics/process_info.h"

struct MHD_Daemon;
struct MHD_Connection;

namespace herd::metrics {

class Endpoint {
 public:
  // Prometheus scrapes each target over one connection at a time; a few hundred leave room
  // for every scraper and tool of a cluster, and bound the descriptors a process spends here.
  static constexpr int kMaxConnections = 256;
  // A scrape's request is a few hundred bytes; MHD refuses a head beyond this with 431.
  static constexpr int kMaxRequestHeadBytes = 16 << 10;
  // A scraper sends its whole request at once: well within this even on a loaded machine.
  static constexpr std::chrono::seconds kHeadDeadline{2};
  static constexpr std::chrono::seconds kIdleTimeout{2};
  // The answer is at most a few MiB; a client that takes longer to read it is dropped.
  static constexpr std::chrono::seconds kConnectionDeadline{10};

  static absl::StatusOr<std::unique_ptr<Endpoint>> Start(const std::string& listen);
  ~Endpoint();

  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  int port() const { return port_; }
  // http://HOST:PORT/metrics, with the port that was bound.
  std::string url() const;

 private:
  struct Callbacks;
  struct Clock {
    std::chrono::steady_clock::time_point accepted;
    int fd = -1;
    bool head_done = false;
  };
  Endpoint(std::string host, int port);
  void Serve();
  // Shuts down connections past their deadlines (on the endpoint's thread).
  void Sweep();

  const std::string host_;
  const int port_;
  MHD_Daemon* daemon_ = nullptr;
  // Every open connection's clock; touched only on the endpoint's thread (MHD's callbacks run
  // there too).
  std::map<MHD_Connection*, Clock> clocks_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// The process's endpoint: Start, kept until the process exits (never destroyed, so no exit
// path waits for its thread). What a role calls for --metrics-listen; a second call is
// FAILED_PRECONDITION naming the first address. Registers the process as `role` first
// (process_info.h), so the first scrape already has its build, up-time and families.
absl::StatusOr<const Endpoint*> StartProcessEndpoint(const std::string& listen, Role role);

// Checks "HOST:PORT" as Start takes it; returns the address in the form the HTTP server binds
// ("127.0.0.1:9100", "[::1]:0": `localhost` becomes 127.0.0.1).
absl::StatusOr<std::string> ParseListenAddress(const std::string& listen);

}  // namespace herd::metrics
