#pragma once
// The gRPC edge of a shard: herd.v1.ParameterServer over an Engine, plus grpc.health.v1.
// absl codes map to gRPC codes one to one. Optional TLS (PEM certificate and key) and a bearer
// token checked on every herd.v1 call (UNAUTHENTICATED without it); health answers without.
//
// The server starts before its engine exists: a shard must listen (to register its address
// with the scheduler) before it learns which job and keys it serves. Until SetEngine, calls
// are UNAVAILABLE ("starting").
//
// gRPC headers stay inside service.cc.

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/engine.h"

namespace herd::server {

struct ServiceOptions {
  std::string listen = "127.0.0.1:0";  // host:port; port 0 picks a free one
  std::string tls_cert_file;           // both set: TLS; both empty: plaintext
  std::string tls_key_file;
  std::string token;  // non-empty: every herd.v1 call needs "authorization: Bearer <token>"
  // Most threads serving calls at once (0: gRPC's default). Pushes and pulls of a round in
  // progress each hold one, so keep it above twice the job's workers.
  int threads = 0;
  // A client stream silent this long while the shard waits for its next message is cancelled,
  // so silent streams cannot hold every serving thread (server/idle_watchdog.h).
  std::chrono::milliseconds stream_idle_timeout{std::chrono::seconds(30)};
};

class ShardServer {
 public:
  // Binds and starts serving. INVALID_ARGUMENT for unreadable TLS files, UNAVAILABLE when the
  // address cannot be bound.
  static absl::StatusOr<std::unique_ptr<ShardServer>> Start(const ServiceOptions& options);
  virtual ~ShardServer() = default;
  virtual int port() const = 0;
  // Starts answering with `engine` (which must outlive the server, or Shutdown first).
  virtual void SetEngine(Engine* engine) = 0;
  // Wakes blocked calls (UNAVAILABLE) and stops serving within about a second.
  virtual void Shutdown() = 0;
};

}  // namespace herd::server
