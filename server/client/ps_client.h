#pragma once
// A client of one herd.v1.ParameterServer shard: one method per RPC, absl::Status out (the
// shard's gRPC code and message, prefixed with its address). Adds the bearer token and a
// deadline to every call. Thread-safe.
//
// ShardedPsClient (sharded_client.h) routes a whole model over the shards of a plan.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/cancel_token.h"
#include "common/deadline.h"
#include "herd/v1/ps.pb.h"

namespace prometheus {
class Counter;
}

namespace herd::server {

struct PsClientOptions {
  std::string address;  // host:port of the shard
  std::string token;    // bearer token (empty: none)
  bool tls = false;
  std::string tls_ca_file;                        // PEM roots (empty: system)
  std::chrono::milliseconds call_timeout{30000};  // the deadline of every call
  // When set, cancelling it ends every call in flight and every later one with its reason
  // (the worker's session cancels it when the scheduler says the job ended).
  std::shared_ptr<CancelToken> cancel;
  // When set, the payload bytes of every push are added to it (the worker's
  // herd_worker_sent_bytes_total{mode, peer="server"}, docs/metrics.md).
  prometheus::Counter* sent_bytes = nullptr;
};

class PsClient {
 public:
  // INVALID_ARGUMENT for an empty address or an unreadable CA file. Connects lazily.
  static absl::StatusOr<std::unique_ptr<PsClient>> Connect(const PsClientOptions& options);
  virtual ~PsClient() = default;

  virtual absl::StatusOr<herd::v1::InitKeysResponse> InitKeys(
      const std::vector<herd::v1::InitKeyChunk>& chunks) = 0;
  // One stream of pushes; returns the number of chunks accepted.
  virtual absl::StatusOr<int> Push(const std::vector<herd::v1::PushChunk>& chunks) = 0;
  virtual absl::StatusOr<std::vector<herd::v1::PullChunk>> Pull(
      const herd::v1::PullRequest& request) = 0;
  virtual absl::StatusOr<std::vector<herd::v1::PullChunk>> PushPull(
      const std::vector<herd::v1::PushChunk>& chunks) = 0;
  virtual absl::StatusOr<herd::v1::ShardStats> Stats() = 0;
  virtual absl::StatusOr<int> Checkpoint(const std::string& job) = 0;
  // grpc.health.v1 Check: OK when the shard serves.
  virtual absl::Status CheckHealth() = 0;
};

}  // namespace herd::server
