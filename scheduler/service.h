#pragma once
// The gRPC edge of the scheduler: herd.v1.Scheduler over a SchedulerCore, plus the standard
// grpc.health.v1 health service. Maps absl::Status to grpc::Status code for code. Optional TLS
// (PEM certificate and key) and a bearer token checked on every herd.v1 call
// (UNAUTHENTICATED without it); the health service answers without the token so that probes
// need no secret.
//
// gRPC headers stay inside service.cc, so a file that starts a scheduler does not pay for them.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "scheduler/scheduler_core.h"

namespace herd::scheduler {

struct ServerOptions {
  std::string listen = "127.0.0.1:7070";  // host:port; port 0 picks a free one
  std::string tls_cert_file;              // both set: TLS; both empty: plaintext
  std::string tls_key_file;
  std::string token;  // non-empty: every call needs "authorization: Bearer <token>"
};

class SchedulerServer {
 public:
  // Binds and starts serving `core` (which must outlive the server). INVALID_ARGUMENT for
  // unreadable TLS files, UNAVAILABLE when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<SchedulerServer>> Start(SchedulerCore* core,
                                                                const ServerOptions& options);
  virtual ~SchedulerServer() = default;
  virtual int port() const = 0;  // the bound port (the chosen one when listening on port 0)
  // Wakes the core's blocked calls and stops serving (in-flight calls get a second to end).
  virtual void Shutdown() = 0;
};

}  // namespace herd::scheduler
