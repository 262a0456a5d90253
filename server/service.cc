#include "server/service.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <atomic>
#include <set>
#include <type_traits>

#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "herd/v1/ps.grpc.pb.h"
#include "metrics/shard_metrics.h"
#include "metrics/timer.h"
#include "proto/rpc/grpc_support.h"
#include "server/idle_watchdog.h"

namespace herd::server {
namespace {

using grpc::ServerContext;
using herd::v1::PullChunk;
using herd::v1::PushChunk;

// The longest a call waits when the client gave no deadline.
constexpr auto kMaxWait = std::chrono::minutes(10);
// Waits are cut in slices this long so a call whose client went away frees its thread.
constexpr auto kWaitSlice = std::chrono::milliseconds(200);
// gRPC messages: a chunk of a few MiB plus its header.
constexpr int kMaxMessageBytes = 64 << 20;

using rpc::ToGrpc;

Deadline CallDeadline(const ServerContext* ctx, int64_t timeout_ms = 0) {
  return rpc::CallDeadline(ctx, kMaxWait, timeout_ms);
}

// Runs `wait(slice_deadline)` until it returns anything but a slice's DEADLINE_EXCEEDED: the
// call's own deadline passed, or the client cancelled (then CANCELLED).
template <typename Wait>
auto Sliced(const ServerContext* ctx, Deadline deadline, Wait wait) -> decltype(wait(deadline)) {
  for (;;) {
    const Deadline slice(std::min(deadline.at(), Deadline::After(kWaitSlice).at()));
    auto result = wait(slice);
    if (ctx->IsCancelled()) return absl::CancelledError("the client cancelled the call");
    const absl::Status st = [&] {
      if constexpr (std::is_same_v<decltype(result), absl::Status>) {
        return result;
      } else {
        return result.status();
      }
    }();
    if (!absl::IsDeadlineExceeded(st) || deadline.expired()) return result;
  }
}

PushArgs ArgsOf(const PushChunk& c) {
  return PushArgs{c.job(),
                  c.worker(),
                  KeyId{c.tensor(), c.chunk()},
                  c.round(),
                  c.data(),
                  c.dtype(),
                  c.learning_rate(),
                  {c.joiners().begin(), c.joiners().end()},
                  c.has_iteration() ? std::optional<int64_t>(c.iteration()) : std::nullopt};
}

// Chunks over the wire must say their element type (the engine also takes "" from in-process
// callers that know it); only fp32 is served.
absl::Status CheckWireDtype(const std::string& dtype, int tensor, int chunk, const char* what) {
  if (dtype == "fp32" || dtype == "float32") return absl::OkStatus();
  if (dtype.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s of key (%d, %d) carries no dtype: set it to the tensor's (this shard serves fp32)",
        what, tensor, chunk));
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("%s of key (%d, %d) has dtype %s: this shard serves fp32 tensors only", what,
                      tensor, chunk, dtype));
}

// The answer to a stream the watchdog ended: the client sees CANCELLED (the call was
// cancelled to free the thread), the log and a client that asks see why.
grpc::Status IdleError(const IdleWatchdog& w, const char* rpc, bool first) {
  return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                      absl::StrFormat("%s stream sent nothing for %d ms%s: the shard ended it", rpc,
                                      (first ? w.first_idle() : w.idle()).count(),
                                      first ? " after it opened" : ""));
}

// The streams of one client connection that may wait for their first message at once: half
// the shard's threads (it needs at least two per worker, and each worker has a connection of
// its own), at least 2; 64 when the threads are gRPC's (unbounded).
int OpeningBound(int threads) { return threads > 0 ? std::max(2, threads / 2) : 64; }

// A stream refused because its client has too many streams that sent nothing.
grpc::Status TooManyOpening(const OpeningStreams& o, const OpeningStreams::Guard& g,
                            const char* rpc) {
  return grpc::Status(
      grpc::StatusCode::RESOURCE_EXHAUSTED,
      absl::StrFormat("%s stream refused: client %s has %d streams open that sent nothing yet, "
                      "the most one client may (each holds a thread of this shard)",
                      rpc, g.peer().substr(0, 80), o.max_per_peer()));
}

class PsService final : public herd::v1::ParameterServer::Service {
 public:
  PsService(const std::string& token, std::chrono::milliseconds idle, int threads)
      : token_(token, "the parameter-server shard"),
        watchdog_(idle),
        opening_(OpeningBound(threads)) {}

  void SetEngine(Engine* e) { engine_.store(e); }

  grpc::Status InitKeys(ServerContext* ctx, grpc::ServerReader<herd::v1::InitKeyChunk>* reader,
                        herd::v1::InitKeysResponse* resp) override {
    Engine* e = nullptr;
    if (auto st = Begin(ctx, &e); !st.ok()) return st;
    OpeningStreams::Guard opening(&opening_, ctx);
    if (!opening.admitted()) return TooManyOpening(opening_, opening, "InitKeys");
    herd::v1::InitKeyChunk c;
    bool idle = false;
    while (ReadWithin(&watchdog_, ctx, reader, &c, &idle, opening.waiting())) {
      opening.Done();
      if (auto st = CheckWireDtype(c.dtype(), c.tensor(), c.chunk(), "initial value"); !st.ok()) {
        return ToGrpc(st);
      }
      if (c.worker() < 0 || c.worker() >= e->config().workers) {
        return ToGrpc(absl::NotFoundError(
            absl::StrFormat("worker rank %d is not in job '%s' (ranks 0..%d): it cannot initialise "
                            "keys",
                            c.worker(), e->config().job, e->config().workers - 1)));
      }
      auto done = e->Init(c.job(), KeyId{c.tensor(), c.chunk()}, c.values());
      if (!done.ok()) return ToGrpc(done.status());
      if (*done) {
        resp->set_initialized(resp->initialized() + 1);
      } else {
        resp->set_already(resp->already() + 1);
      }
    }
    if (idle) return IdleError(watchdog_, "InitKeys", resp->initialized() + resp->already() == 0);
    return grpc::Status::OK;
  }

  grpc::Status Push(ServerContext* ctx, grpc::ServerReader<PushChunk>* reader,
                    herd::v1::PushResponse* resp) override {
    metrics::ScopedTimer timer(metrics::ShardMetrics::Get().push_seconds());
    Engine* e = nullptr;
    if (auto st = Begin(ctx, &e); !st.ok()) return st;
    std::vector<std::pair<KeyId, int64_t>> rounds;
    if (auto st = AcceptPushes(ctx, e, reader, &rounds); !st.ok()) return st;
    resp->set_chunks(static_cast<int32_t>(rounds.size()));
    // The acknowledgement of every-round: the rounds this stream joined are complete and
    // written (ps_async writes each push before accepting it).
    const auto& config = e->config();
    if (config.durability.kind == Durability::Kind::kEveryRound && config.mode != Mode::kAsync) {
      const Deadline deadline = CallDeadline(ctx);
      for (const auto& [key, round] : rounds) {
        auto st = Sliced(ctx, deadline, [&](Deadline d) { return e->WaitRound(key, round, d); });
        if (!st.ok()) return ToGrpc(st);
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status Pull(ServerContext* ctx, const herd::v1::PullRequest* req,
                    grpc::ServerWriter<PullChunk>* writer) override {
    metrics::ScopedTimer timer(metrics::ShardMetrics::Get().pull_seconds());
    Engine* e = nullptr;
    if (auto st = Begin(ctx, &e); !st.ok()) return st;
    std::vector<KeyId> keys;
    for (const auto& k : req->keys()) keys.push_back(KeyId{k.tensor(), k.chunk()});
    if (keys.empty()) keys = e->Keys();
    const Deadline deadline = CallDeadline(ctx, req->timeout_ms());
    for (const KeyId& key : keys) {
      auto st = Send(ctx, e, writer, req->job(), req->worker(), key, req->min_version(), deadline);
      if (!st.ok()) return st;
    }
    return grpc::Status::OK;
  }

  grpc::Status PushPull(ServerContext* ctx,
                        grpc::ServerReaderWriter<PullChunk, PushChunk>* stream) override {
    metrics::ScopedTimer timer(metrics::ShardMetrics::Get().push_pull_seconds());
    Engine* e = nullptr;
    if (auto st = Begin(ctx, &e); !st.ok()) return st;
    std::vector<std::pair<KeyId, int64_t>> rounds;
    std::string job;
    int worker = 0;
    if (auto st = AcceptPushes(ctx, e, stream, &rounds, &job, &worker); !st.ok()) return st;
    const Deadline deadline = CallDeadline(ctx);
    const bool async = e->config().mode == Mode::kAsync;
    for (const auto& [key, round] : rounds) {
      if (async) {
        // Stale-synchronous read: the parameters answered hold the updates the bound promises.
        auto waited =
            Sliced(ctx, deadline, [&](Deadline d) { return e->WaitReadable(key, round, d); });
        if (!waited.ok()) return ToGrpc(waited);
      }
      auto st = Send(ctx, e, stream, job, worker, key, async ? 0 : round + 1, deadline);
      if (!st.ok()) return st;
    }
    return grpc::Status::OK;
  }

  grpc::Status Stats(ServerContext* ctx, const herd::v1::StatsRequest*,
                     herd::v1::ShardStats* resp) override {
    Engine* e = nullptr;
    if (auto st = Begin(ctx, &e); !st.ok()) return st;
    const auto& c = e->config();
    const EngineStats s = e->Stats();
    resp->set_job(c.job);
    resp->set_shard(c.shard);
    resp->set_mode(ModeName(c.mode));
    resp->set_durability(DurabilityName(c.durability));
    resp->set_keys(s.keys);
    resp->set_keys_initialized(s.keys_initialized);
    resp->set_parameter_bytes(s.parameter_bytes);
    resp->set_pushes(s.pushes);
    resp->set_pulls(s.pulls);
    resp->set_rejected(s.rejected);
    resp->set_rounds_completed(s.rounds_completed);
    resp->set_durable_writes(s.durable_writes);
    resp->set_min_version(s.min_version);
    resp->set_max_version(s.max_version);
    return grpc::Status::OK;
  }

  grpc::Status Checkpoint(ServerContext* ctx, const herd::v1::CheckpointRequest* req,
                          herd::v1::CheckpointResponse* resp) override {
    Engine* e = nullptr;
    if (auto st = Begin(ctx, &e); !st.ok()) return st;
    if (req->job() != e->config().job) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrFormat("job '%s' is not served by this shard (it serves '%s')",
                                          req->job(), e->config().job));
    }
    auto n = e->WriteAll();
    if (!n.ok()) return ToGrpc(n.status());
    resp->set_keys(*n);
    return grpc::Status::OK;
  }

 private:
  grpc::Status Begin(const ServerContext* ctx, Engine** e) const {
    if (auto st = Authenticate(ctx); !st.ok()) return st;
    *e = engine_.load();
    if (*e == nullptr) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "this shard is starting: it has not been assigned its job's keys yet");
    }
    return grpc::Status::OK;
  }

  // Reads the pushes of a stream and hands each to the engine; the first refusal ends the
  // call with its error (the chunks before it stay accepted).
  template <typename Reader>
  grpc::Status AcceptPushes(ServerContext* ctx, Engine* e, Reader* reader,
                            std::vector<std::pair<KeyId, int64_t>>* rounds,
                            std::string* job = nullptr, int* worker = nullptr) {
    OpeningStreams::Guard opening(&opening_, ctx);
    if (!opening.admitted()) return TooManyOpening(opening_, opening, "push");
    const Deadline deadline = CallDeadline(ctx);
    PushChunk c;
    bool idle = false;
    while (ReadWithin(&watchdog_, ctx, reader, &c, &idle, opening.waiting())) {
      opening.Done();
      if (job != nullptr && rounds->empty()) {
        *job = c.job();
        *worker = c.worker();
      }
      if (auto st = CheckWireDtype(c.dtype(), c.tensor(), c.chunk(), "push"); !st.ok()) {
        return ToGrpc(st);
      }
      if (auto st = e->Push(ArgsOf(c), deadline); !st.ok()) return ToGrpc(st);
      rounds->emplace_back(KeyId{c.tensor(), c.chunk()}, c.round());
    }
    if (idle) return IdleError(watchdog_, "push", rounds->empty());
    return grpc::Status::OK;
  }

  template <typename Writer>
  grpc::Status Send(const ServerContext* ctx, Engine* e, Writer* writer, const std::string& job,
                    int worker, KeyId key, int64_t min_version, Deadline deadline) {
    auto pulled = Sliced(ctx, deadline,
                         [&](Deadline d) { return e->Pull(job, worker, key, min_version, d); });
    if (!pulled.ok()) return ToGrpc(pulled.status());
    PullChunk out;
    out.set_tensor(key.tensor);
    out.set_chunk(key.chunk);
    out.set_version(pulled->version);
    out.set_data(std::move(pulled->data));
    if (!writer->Write(out)) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
    }
    return grpc::Status::OK;
  }

  grpc::Status Authenticate(const ServerContext* ctx) const { return token_.Check(ctx); }

  const rpc::BearerTokenCheck token_;
  IdleWatchdog watchdog_;
  OpeningStreams opening_;
  std::atomic<Engine*> engine_{nullptr};
};

class GrpcShardServer final : public ShardServer {
 public:
  explicit GrpcShardServer(const ServiceOptions& options)
      : service_(std::make_unique<PsService>(options.token, options.stream_idle_timeout,
                                             options.threads)) {}
  ~GrpcShardServer() override { Shutdown(); }

  absl::Status Start(const ServiceOptions& options) {
    auto creds = rpc::ServerCredentialsFromFiles(options.tls_cert_file, options.tls_key_file);
    if (!creds.ok()) return creds.status();
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    builder.AddListeningPort(options.listen, *creds, &port_);
    builder.RegisterService(service_.get());
    builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
    builder.SetMaxSendMessageSize(kMaxMessageBytes);
    if (options.threads > 0) {
      grpc::ResourceQuota quota("herd-server");
      quota.SetMaxThreads(options.threads);
      builder.SetResourceQuota(quota);
    }
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port_ == 0) {
      return absl::UnavailableError(absl::StrFormat(
          "cannot listen on %s (address in use, or not host:port?)", options.listen));
    }
    server_->GetHealthCheckService()->SetServingStatus(true);
    Log().info("server: serving herd.v1.ParameterServer on {} (port {}, {}{})", options.listen,
               port_, options.tls_cert_file.empty() ? "plaintext" : "TLS",
               options.token.empty() ? "" : ", bearer token required");
    return absl::OkStatus();
  }

  int port() const override { return port_; }
  void SetEngine(Engine* engine) override {
    engine_ = engine;
    service_->SetEngine(engine);
  }

  void Shutdown() override {
    if (server_ == nullptr) return;
    if (engine_ != nullptr) engine_->Shutdown();
    server_->GetHealthCheckService()->SetServingStatus(false);
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_->Wait();
    server_.reset();
  }

 private:
  std::unique_ptr<PsService> service_;
  std::unique_ptr<grpc::Server> server_;
  Engine* engine_ = nullptr;
  int port_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ShardServer>> ShardServer::Start(const ServiceOptions& options) {
  auto server = std::make_unique<GrpcShardServer>(options);
  if (auto st = server->Start(options); !st.ok()) return st;
  return std::unique_ptr<ShardServer>(std::move(server));
}

}  // namespace herd::server
