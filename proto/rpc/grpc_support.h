#pragma once
// gRPC plumbing shared by herd's services (scheduler, parameter-server shards) and their
// clients: status mapping, call deadlines, TLS credentials from PEM files, and the bearer
// token every call must carry when a service is given one.

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/deadline.h"

namespace herd::rpc {

// absl and gRPC share the canonical code numbering, so the code passes through unchanged.
grpc::Status ToGrpc(const absl::Status& st);

// The deadline of a blocking call: the client's own, bounded by `max_wait` and by
// `timeout_ms` when the request sets one (> 0); a negative `timeout_ms` is no wait (now).
Deadline CallDeadline(const grpc::ServerContextBase* ctx, std::chrono::nanoseconds max_wait,
                      int64_t timeout_ms = 0);

// The whole file; INVALID_ARGUMENT naming `what` and the path when it cannot be read.
absl::StatusOr<std::string> ReadFileText(const std::string& path, std::string_view what);

// The token of a --token-file: its text without surrounding white space; an empty token is
// INVALID_ARGUMENT (it would switch authentication off by accident).
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// TLS from a PEM certificate and key (both or neither: neither means plaintext).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFromFiles(
    const std::string& cert_file, const std::string& key_file);

// Plaintext, or TLS trusting `ca_file` (empty: the system's roots).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    bool tls, const std::string& ca_file);

// The check of "authorization: Bearer <token>" on every call of a service. `service` names it
// in the messages ("this scheduler", "the shard"), so a person knows which --token-file to fix.
class BearerTokenCheck {
 public:
  // An empty token accepts every call.
  BearerTokenCheck(const std::string& token, std::string service);
  // OK, or UNAUTHENTICATED saying whether the token was missing, wrong or given twice.
  grpc::Status Check(const grpc::ServerContextBase* ctx) const;

 private:
  std::string expected_;  // "Bearer <token>", or empty
  std::string service_;
};

}  // namespace herd::rpc
