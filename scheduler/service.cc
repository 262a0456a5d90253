#include "scheduler/service.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/logging.h"
#include "herd/v1/scheduler.grpc.pb.h"

namespace herd::scheduler {
namespace {

using grpc::ServerContext;

// The longest a blocking call waits when the client gave no deadline.
constexpr auto kMaxWait = std::chrono::minutes(10);
// How often a plan watcher checks that its client is still there.
constexpr auto kWatchSlice = std::chrono::milliseconds(200);

grpc::Status ToGrpc(const absl::Status& st) {
  if (st.ok()) return grpc::Status::OK;
  // absl and gRPC share the canonical code numbering.
  return grpc::Status(static_cast<grpc::StatusCode>(st.code()), std::string(st.message()));
}

absl::StatusOr<std::string> ReadFile(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrFormat("cannot read the %s file %s", what, path));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The deadline of a blocking call: the client's own, bounded by kMaxWait and by `timeout_ms`
// when the request sets one.
Deadline CallDeadline(const ServerContext* ctx, int64_t timeout_ms) {
  auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(
      ctx->deadline() - std::chrono::system_clock::now());
  left = std::min<std::chrono::nanoseconds>(left, kMaxWait);
  if (timeout_ms > 0)
    left = std::min<std::chrono::nanoseconds>(left, std::chrono::milliseconds(timeout_ms));
  return Deadline::After(std::max<std::chrono::nanoseconds>(left, std::chrono::nanoseconds(0)));
}

class SchedulerService final : public herd::v1::Scheduler::Service {
 public:
  SchedulerService(SchedulerCore* core, std::string token)
      : core_(core), expected_(token.empty() ? "" : "Bearer " + token) {}

  grpc::Status RegisterNode(ServerContext* ctx, const herd::v1::RegisterNodeRequest* req,
                            herd::v1::RegisterNodeResponse* resp) override {
    return Answer(
        ctx, [&] { return core_->RegisterNode(*req); }, resp);
  }
  grpc::Status Heartbeat(ServerContext* ctx, const herd::v1::HeartbeatRequest* req,
                         herd::v1::HeartbeatResponse* resp) override {
    return Answer(
        ctx, [&] { return core_->Heartbeat(*req); }, resp);
  }
  grpc::Status SubmitJob(ServerContext* ctx, const herd::v1::SubmitJobRequest* req,
                         herd::v1::JobStatus* resp) override {
    return Answer(
        ctx, [&] { return core_->SubmitJob(req->spec()); }, resp);
  }
  grpc::Status GetJob(ServerContext* ctx, const herd::v1::GetJobRequest* req,
                      herd::v1::JobStatus* resp) override {
    return Answer(
        ctx, [&] { return core_->GetJob(req->name()); }, resp);
  }
  grpc::Status ListJobs(ServerContext* ctx, const herd::v1::ListJobsRequest*,
                        herd::v1::ListJobsResponse* resp) override {
    if (auto st = Authenticate(ctx); !st.ok()) return st;
    for (auto& job : core_->ListJobs()) *resp->add_jobs() = std::move(job);
    return grpc::Status::OK;
  }
  grpc::Status SetMode(ServerContext* ctx, const herd::v1::SetModeRequest* req,
                       herd::v1::JobStatus* resp) override {
    return Answer(
        ctx, [&] { return core_->SetMode(*req); }, resp);
  }
  grpc::Status CancelJob(ServerContext* ctx, const herd::v1::CancelJobRequest* req,
                         herd::v1::JobStatus* resp) override {
    return Answer(
        ctx, [&] { return core_->CancelJob(req->name(), req->reason()); }, resp);
  }
  grpc::Status GetPlan(ServerContext* ctx, const herd::v1::GetPlanRequest* req,
                       herd::v1::Plan* resp) override {
    return Answer(
        ctx, [&] { return core_->GetPlan(*req); }, resp);
  }
  grpc::Status WatchPlan(ServerContext* ctx, const herd::v1::WatchPlanRequest* req,
                         grpc::ServerWriter<herd::v1::Plan>* writer) override {
    if (auto st = Authenticate(ctx); !st.ok()) return st;
    uint64_t seen = req->after_epoch();
    // Wait in short slices so a client that went away releases its thread promptly.
    while (!ctx->IsCancelled()) {
      auto plan = core_->WaitForEpoch(req->job(), seen, Deadline::After(kWatchSlice));
      if (!plan.ok()) return ToGrpc(plan.status());
      if (!plan->has_value()) continue;
      seen = (*plan)->epoch();
      if (!writer->Write(**plan)) return grpc::Status::OK;  // the client is gone
      if ((*plan)->job_cancelled()) return grpc::Status::OK;
    }
    return grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled the watch");
  }
  grpc::Status Barrier(ServerContext* ctx, const herd::v1::BarrierRequest* req,
                       herd::v1::BarrierResponse* resp) override {
    return Answer(
        ctx, [&] { return core_->Barrier(*req, CallDeadline(ctx, req->timeout_ms())); }, resp);
  }
  grpc::Status ReportIteration(ServerContext* ctx, const herd::v1::ReportIterationRequest* req,
                               herd::v1::ReportIterationResponse* resp) override {
    return Answer(
        ctx, [&] { return core_->ReportIteration(*req); }, resp);
  }
  grpc::Status StoreSet(ServerContext* ctx, const herd::v1::StoreSetRequest* req,
                        herd::v1::StoreSetResponse*) override {
    if (auto st = Authenticate(ctx); !st.ok()) return st;
    return ToGrpc(core_->StoreSet(req->job(), req->key(), req->value()));
  }
  grpc::Status StoreGet(ServerContext* ctx, const herd::v1::StoreGetRequest* req,
                        herd::v1::StoreGetResponse* resp) override {
    if (auto st = Authenticate(ctx); !st.ok()) return st;
    auto value = core_->StoreGet(req->job(), req->key(), CallDeadline(ctx, req->timeout_ms()));
    if (!value.ok()) return ToGrpc(value.status());
    resp->set_value(std::move(*value));
    return grpc::Status::OK;
  }

 private:
  grpc::Status Authenticate(const ServerContext* ctx) const {
    if (expected_.empty()) return grpc::Status::OK;
    const auto& md = ctx->client_metadata();
    auto it = md.find("authorization");
    if (it == md.end()) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "this scheduler requires a bearer token: pass --token-file");
    }
    const std::string_view got(it->second.data(), it->second.size());
    // Compare every byte whatever the first difference, so timing does not leak the token.
    unsigned diff = got.size() != expected_.size();
    for (size_t i = 0; i < got.size() && i < expected_.size(); ++i) diff |= got[i] ^ expected_[i];
    if (diff != 0) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "the bearer token is wrong: check --token-file against the scheduler's");
    }
    return grpc::Status::OK;
  }

  // Authenticates, then runs `call` (a SchedulerCore method) and maps its result.
  template <typename Call, typename T>
  grpc::Status Answer(const ServerContext* ctx, Call call, T* resp) {
    if (auto st = Authenticate(ctx); !st.ok()) return st;
    auto result = call();
    if (!result.ok()) return ToGrpc(result.status());
    *resp = std::move(*result);
    return grpc::Status::OK;
  }

  SchedulerCore* core_;
  const std::string expected_;
};

class GrpcSchedulerServer final : public SchedulerServer {
 public:
  GrpcSchedulerServer(SchedulerCore* core, std::unique_ptr<SchedulerService> service)
      : core_(core), service_(std::move(service)) {}
  ~GrpcSchedulerServer() override { Shutdown(); }

  absl::Status Start(const ServerOptions& options) {
    std::shared_ptr<grpc::ServerCredentials> creds;
    if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
      return absl::InvalidArgumentError(
          "TLS needs both --tls-cert and --tls-key (PEM files); give both or neither");
    }
    if (!options.tls_cert_file.empty()) {
      auto cert = ReadFile(options.tls_cert_file, "TLS certificate");
      if (!cert.ok()) return cert.status();
      auto key = ReadFile(options.tls_key_file, "TLS key");
      if (!key.ok()) return key.status();
      grpc::SslServerCredentialsOptions ssl;
      ssl.pem_key_cert_pairs.push_back({*key, *cert});
      creds = grpc::SslServerCredentials(ssl);
    } else {
      creds = grpc::InsecureServerCredentials();
    }
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    builder.AddListeningPort(options.listen, creds, &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port_ == 0) {
      return absl::UnavailableError(absl::StrFormat(
          "cannot listen on %s (address in use, or not host:port?)", options.listen));
    }
    server_->GetHealthCheckService()->SetServingStatus(true);
    Log().info("scheduler: serving herd.v1.Scheduler on {} (port {}, {}{})", options.listen, port_,
               options.tls_cert_file.empty() ? "plaintext" : "TLS",
               options.token.empty() ? "" : ", bearer token required");
    return absl::OkStatus();
  }

  int port() const override { return port_; }

  void Shutdown() override {
    if (server_ == nullptr) return;
    core_->Shutdown();  // blocked calls return UNAVAILABLE at once
    server_->GetHealthCheckService()->SetServingStatus(false);
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_->Wait();
    server_.reset();
  }

 private:
  SchedulerCore* core_;
  std::unique_ptr<SchedulerService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SchedulerServer>> SchedulerServer::Start(
    SchedulerCore* core, const ServerOptions& options) {
  auto server = std::make_unique<GrpcSchedulerServer>(
      core, std::make_unique<SchedulerService>(core, options.token));
  if (auto st = server->Start(options); !st.ok()) return st;
  return std::unique_ptr<SchedulerServer>(std::move(server));
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  auto text = ReadFile(path, "token");
  if (!text.ok()) return text.status();
  std::string token(absl::StripAsciiWhitespace(*text));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat("the token file %s is empty", path));
  }
  return token;
}

}  // namespace herd::scheduler
