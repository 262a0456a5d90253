#include "server/client/ps_client.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <mutex>

#include "absl/strings/str_format.h"
#include "common/cancel_token.h"
#include "herd/v1/ps.grpc.pb.h"
#include "metrics/timer.h"
#include "metrics/worker_metrics.h"
#include "proto/rpc/grpc_support.h"

namespace herd::server {
namespace {

using herd::v1::PullChunk;
using herd::v1::PushChunk;

class GrpcPsClient final : public PsClient {
 public:
  GrpcPsClient(const PsClientOptions& options, std::shared_ptr<grpc::Channel> channel)
      : options_(options),
        channel_(std::move(channel)),
        stub_(herd::v1::ParameterServer::NewStub(channel_)) {}

  absl::StatusOr<herd::v1::InitKeysResponse> InitKeys(
      const std::vector<herd::v1::InitKeyChunk>& chunks) override {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    CancelRegistration cancel(options_.cancel.get(), [&ctx] { ctx.TryCancel(); });
    herd::v1::InitKeysResponse resp;
    auto writer = stub_->InitKeys(&ctx, &resp);
    for (const auto& c : chunks) {
      if (!writer->Write(c)) break;  // the shard ended the call; Finish says why
    }
    writer->WritesDone();
    if (auto st = Map(writer->Finish()); !st.ok()) return st;
    return resp;
  }

  absl::StatusOr<int> Push(const std::vector<PushChunk>& chunks) override {
    metrics::ScopedTimer timer(metrics::WorkerMetrics::Get().push_seconds());
    CountSent(chunks);
    grpc::ClientContext ctx;
    Prepare(&ctx);
    CancelRegistration cancel(options_.cancel.get(), [&ctx] { ctx.TryCancel(); });
    herd::v1::PushResponse resp;
    auto writer = stub_->Push(&ctx, &resp);
    for (const auto& c : chunks) {
      if (!writer->Write(c)) break;
    }
    writer->WritesDone();
    if (auto st = Map(writer->Finish()); !st.ok()) return st;
    return resp.chunks();
  }

  absl::StatusOr<std::vector<PullChunk>> Pull(const herd::v1::PullRequest& request) override {
    metrics::ScopedTimer timer(metrics::WorkerMetrics::Get().pull_seconds());
    grpc::ClientContext ctx;
    Prepare(&ctx);
    CancelRegistration cancel(options_.cancel.get(), [&ctx] { ctx.TryCancel(); });
    auto reader = stub_->Pull(&ctx, request);
    std::vector<PullChunk> out;
    PullChunk c;
    while (reader->Read(&c)) out.push_back(std::move(c));
    if (auto st = Map(reader->Finish()); !st.ok()) return st;
    return out;
  }

  absl::StatusOr<std::vector<PullChunk>> PushPull(const std::vector<PushChunk>& chunks) override {
    metrics::ScopedTimer timer(metrics::WorkerMetrics::Get().push_pull_seconds());
    CountSent(chunks);
    grpc::ClientContext ctx;
    Prepare(&ctx);
    CancelRegistration cancel(options_.cancel.get(), [&ctx] { ctx.TryCancel(); });
    auto stream = stub_->PushPull(&ctx);
    for (const auto& c : chunks) {
      if (!stream->Write(c)) break;
    }
    stream->WritesDone();
    std::vector<PullChunk> out;
    PullChunk c;
    while (stream->Read(&c)) out.push_back(std::move(c));
    if (auto st = Map(stream->Finish()); !st.ok()) return st;
    return out;
  }

  absl::StatusOr<herd::v1::ShardStats> Stats() override {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    CancelRegistration cancel(options_.cancel.get(), [&ctx] { ctx.TryCancel(); });
    herd::v1::ShardStats resp;
    if (auto st = Map(stub_->Stats(&ctx, herd::v1::StatsRequest(), &resp)); !st.ok()) return st;
    return resp;
  }

  absl::StatusOr<int> Checkpoint(const std::string& job) override {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    CancelRegistration cancel(options_.cancel.get(), [&ctx] { ctx.TryCancel(); });
    herd::v1::CheckpointRequest req;
    req.set_job(job);
    herd::v1::CheckpointResponse resp;
    if (auto st = Map(stub_->Checkpoint(&ctx, req, &resp)); !st.ok()) return st;
    return resp.keys();
  }

  absl::Status CheckHealth() override {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options_.call_timeout);
    // grpc.health.v1.HealthCheckRequest{service: ""} is the empty message; a ByteBuffer
    // without a slice is not a valid message.
    grpc::Slice empty(std::string{});
    grpc::ByteBuffer request(&empty, 1);
    grpc::ByteBuffer response;
    grpc::GenericStub generic(channel_);
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    grpc::Status result;
    generic.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                      &response, [&](grpc::Status st) {
                        std::lock_guard<std::mutex> lock(mu);
                        result = st;
                        done = true;
                        cv.notify_all();
                      });
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
    if (auto st = Map(result); !st.ok()) return st;
    // HealthCheckResponse{status: SERVING} is field 1, varint 1.
    std::vector<grpc::Slice> slices;
    std::string bytes;
    if (response.Dump(&slices).ok()) {
      for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    if (bytes != std::string("\x08\x01", 2)) {
      return absl::UnavailableError(
          absl::StrFormat("shard %s: health check says not serving", options_.address));
    }
    return absl::OkStatus();
  }

 private:
  // The payload bytes of a push (herd_worker_sent_bytes_total{peer="server"}): one add per
  // call, whatever the number of chunks.
  void CountSent(const std::vector<PushChunk>& chunks) const {
    if (options_.sent_bytes == nullptr) return;
    size_t bytes = 0;
    for (const auto& c : chunks) bytes += c.data().size();
    options_.sent_bytes->Increment(static_cast<double>(bytes));
  }

  void Prepare(grpc::ClientContext* ctx) const {
    if (!options_.token.empty()) ctx->AddMetadata("authorization", "Bearer " + options_.token);
    ctx->set_deadline(std::chrono::system_clock::now() + options_.call_timeout);
  }

  absl::Status Map(const grpc::Status& st) const {
    if (st.ok()) return absl::OkStatus();
    // A call cancelled because the job ended says why the job ended, not "Cancelled".
    if (options_.cancel != nullptr && !options_.cancel->reason().ok()) {
      return options_.cancel->reason();
    }
    return absl::Status(static_cast<absl::StatusCode>(st.error_code()),
                        absl::StrFormat("shard %s: %s", options_.address, st.error_message()));
  }

  const PsClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<herd::v1::ParameterServer::Stub> stub_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Connect(const PsClientOptions& options) {
  if (options.address.empty()) {
    return absl::InvalidArgumentError("no parameter-server address (host:port)");
  }
  auto creds = rpc::ChannelCredentialsFor(options.tls, options.tls_ca_file);
  if (!creds.ok()) return creds.status();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(64 << 20);
  // Reconnect quickly after a shard restart instead of backing off for up to two minutes.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  auto channel = grpc::CreateCustomChannel(options.address, *creds, args);
  return std::unique_ptr<PsClient>(new GrpcPsClient(options, std::move(channel)));
}

}  // namespace herd::server
