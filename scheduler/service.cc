#include "scheduler/service.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/logging.h"
#include "herd/v1/scheduler.grpc.pb.h"
#include "proto/rpc/grpc_support.h"
#include "scheduler/bounds.h"
#include "scheduler/limits.h"

namespace herd::scheduler {
namespace {

using grpc::ServerContext;

// The longest a blocking call waits when the client gave no deadline.
constexpr auto kMaxWait = std::chrono::minutes(10);
// How often a plan watcher checks that its client is still there.
constexpr auto kWatchSlice = std::chrono::milliseconds(200);

using rpc::CallDeadline;

// Every refusal leaves through here: the message is cut so that one echoing a long input still
// fits the trailers and the client receives the precise code.
grpc::Status ToGrpc(const absl::Status& st) {
  if (st.ok()) return grpc::Status::OK;
  return rpc::ToGrpc(absl::Status(st.code(), CutMessage(std::string(st.message()))));
}

class SchedulerService final : public herd::v1::Scheduler::Service {
 public:
  SchedulerService(SchedulerCore* core, std::string token)
      : core_(core), token_(token, "the scheduler") {}

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
  grpc::Status ListJobs(ServerContext* ctx, const herd::v1::ListJobsRequest* req,
                        herd::v1::ListJobsResponse* resp) override {
    if (auto st = Authenticate(ctx); !st.ok()) return st;
    if (auto st = core_->Refusal(); !st.ok()) return ToGrpc(st);
    auto page = core_->ListJobs(req->page_token(), limits::kMaxListPageBytes);
    for (auto& job : page.jobs) *resp->add_jobs() = std::move(job);
    resp->set_next_page_token(std::move(page.next_page_token));
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
  grpc::Status DeleteJob(ServerContext* ctx, const herd::v1::DeleteJobRequest* req,
                         herd::v1::DeleteJobResponse*) override {
    if (auto st = Authenticate(ctx); !st.ok()) return st;
    return ToGrpc(core_->DeleteJob(req->name()));
  }
  grpc::Status DeclareModel(ServerContext* ctx, const herd::v1::DeclareModelRequest* req,
                            herd::v1::JobStatus* resp) override {
    return Answer(
        ctx, [&] { return core_->DeclareModel(*req); }, resp);
  }
  grpc::Status FinishWorker(ServerContext* ctx, const herd::v1::FinishWorkerRequest* req,
                            herd::v1::JobStatus* resp) override {
    return Answer(
        ctx, [&] { return core_->FinishWorker(*req); }, resp);
  }
  grpc::Status FailJob(ServerContext* ctx, const herd::v1::FailJobRequest* req,
                       herd::v1::JobStatus* resp) override {
    return Answer(
        ctx, [&] { return core_->FailJob(*req); }, resp);
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
      if (IsTerminal((*plan)->job_state())) return grpc::Status::OK;
    }
    return grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled the watch");
  }
  grpc::Status Barrier(ServerContext* ctx, const herd::v1::BarrierRequest* req,
                       herd::v1::BarrierResponse* resp) override {
    return Answer(
        ctx, [&] { return core_->Barrier(*req, CallDeadline(ctx, kMaxWait, req->timeout_ms())); },
        resp);
  }
  grpc::Status ReportIteration(ServerContext* ctx, const herd::v1::ReportIterationRequest* req,
                               herd::v1::ReportIterationResponse* resp) override {
    return Answer(
        ctx, [&] { return core_->ReportIteration(*req); }, resp);
  }
  grpc::Status RequestCheckpoint(ServerContext* ctx, const herd::v1::RequestCheckpointRequest* req,
                                 herd::v1::CheckpointRecord* resp) override {
    return Answer(
        ctx, [&] { return core_->RequestCheckpoint(*req); }, resp);
  }
  grpc::Status ReportCheckpoint(ServerContext* ctx, const herd::v1::ReportCheckpointRequest* req,
                                herd::v1::ReportCheckpointResponse* resp) override {
    return Answer(
        ctx, [&] { return core_->ReportCheckpoint(*req); }, resp);
  }
  grpc::Status StoreSet(ServerContext* ctx, const herd::v1::StoreSetRequest* req,
                        herd::v1::StoreSetResponse*) override {
    if (auto st = Authenticate(ctx); !st.ok()) return st;
    return ToGrpc(core_->StoreSet(req->job(), req->key(), req->value()));
  }
  grpc::Status StoreGet(ServerContext* ctx, const herd::v1::StoreGetRequest* req,
                        herd::v1::StoreGetResponse* resp) override {
    if (auto st = Authenticate(ctx); !st.ok()) return st;
    auto value =
        core_->StoreGet(req->job(), req->key(), CallDeadline(ctx, kMaxWait, req->timeout_ms()));
    if (!value.ok()) return ToGrpc(value.status());
    resp->set_value(std::move(*value));
    return grpc::Status::OK;
  }
  grpc::Status StoreGetMany(ServerContext* ctx, const herd::v1::StoreGetManyRequest* req,
                            herd::v1::StoreGetManyResponse* resp) override {
    return Answer(
        ctx,
        [&] { return core_->StoreGetMany(*req, CallDeadline(ctx, kMaxWait, req->timeout_ms())); },
        resp);
  }

 private:
  grpc::Status Authenticate(const ServerContext* ctx) const { return token_.Check(ctx); }

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
  const rpc::BearerTokenCheck token_;
};

class GrpcSchedulerServer final : public SchedulerServer {
 public:
  GrpcSchedulerServer(SchedulerCore* core, std::unique_ptr<SchedulerService> service)
      : core_(core), service_(std::move(service)) {}
  ~GrpcSchedulerServer() override { Shutdown(); }

  absl::Status Start(const ServerOptions& options) {
    auto creds = rpc::ServerCredentialsFromFiles(options.tls_cert_file, options.tls_key_file);
    if (!creds.ok()) return creds.status();
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    builder.AddListeningPort(options.listen, *creds, &port_);
    builder.RegisterService(service_.get());
    builder.SetMaxReceiveMessageSize(static_cast<int>(limits::kMaxRequestBytes));
    builder.SetMaxSendMessageSize(static_cast<int>(limits::kMaxAnswerBytes));
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port_ == 0) {
      return absl::UnavailableError(absl::StrFormat(
          "cannot listen on %s (address in use, or not host:port?)", options.listen));
    }
    server_->GetHealthCheckService()->SetServingStatus(true);
    // A scheduler that refuses its state (DATA_LOSS to every call) is not serving: probes and
    // load balancers see it.
    core_->OnRefusal(
        [health = server_->GetHealthCheckService()] { health->SetServingStatus(false); });
    Log().info("scheduler: serving herd.v1.Scheduler on {} (port {}, {}{})", options.listen, port_,
               options.tls_cert_file.empty() ? "plaintext" : "TLS",
               options.token.empty() ? "" : ", bearer token required");
    return absl::OkStatus();
  }

  int port() const override { return port_; }

  void Shutdown() override {
    if (server_ == nullptr) return;
    core_->OnRefusal(nullptr);  // waits for a callback running now: the server goes next
    core_->Shutdown();          // blocked calls return UNAVAILABLE at once
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

}  // namespace herd::scheduler
