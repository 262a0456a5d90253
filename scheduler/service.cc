#include "scheduler/service.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/logging.h"
#include "herd/v1/scheduler.grpc.pb.h"
#include "metrics/scheduler_metrics.h"
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

// The waits (StoreGet, Barrier) and the Follow streams are served by callbacks: a process that
// waits holds no server thread, so thousands of waiting processes cannot exhaust the pool
// that serves the short calls.
using AsyncMethods =
    herd::v1::Scheduler::WithCallbackMethod_Follow<herd::v1::Scheduler::WithCallbackMethod_StoreGet<
        herd::v1::Scheduler::WithCallbackMethod_StoreGetMany<
            herd::v1::Scheduler::WithCallbackMethod_Barrier<herd::v1::Scheduler::Service>>>>;

// Counts the call of `method` on the scheduler's /metrics.
void Count(const char* method) { metrics::SchedulerMetrics::Get().Rpc(method).Increment(); }

// What the core sends one Follow stream, queued for the stream's single writer: events that
// arrive while one is being written merge into the next (the newest view, the highest horizon
// and completion), so a slow reader costs memory for one event, not one per change.
class FollowSink final : public SchedulerCore::FollowSink {
 public:
  explicit FollowSink(grpc::ServerBidiReactor<herd::v1::FollowRequest, herd::v1::FollowEvent>* r)
      : reactor_(r) {}

  void Send(const herd::v1::FollowEvent& e) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (reactor_ == nullptr || finishing_) return;
    Merge(e);
    StartIfIdle();
  }
  // The writer's previous write ended.
  void WriteDone(bool ok) {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (reactor_ == nullptr) return;
    if (!ok) {
      broken_ = true;
      if (!finished_) {
        finished_ = true;
        reactor_->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the stream broke"));
      }
      return;
    }
    if (finishing_) {
      FinishNow();
      return;
    }
    StartIfIdle();
  }
  void Close(const absl::Status& why) override { Finish(ToGrpc(why)); }
  // Ends the stream with `st` once the write in flight (if any) is done; once only.
  void Finish(const grpc::Status& st) {
    std::lock_guard<std::mutex> lock(mu_);
    if (reactor_ == nullptr || finishing_ || finished_) return;
    finishing_ = true;
    finish_ = st;
    if (!writing_) FinishNow();
  }
  void Detach() {
    std::lock_guard<std::mutex> lock(mu_);
    reactor_ = nullptr;
  }

 private:
  void Merge(const herd::v1::FollowEvent& e) {
    if (e.has_view()) *pending_.mutable_view() = e.view();
    pending_.set_horizon(has_pending_ ? std::max(pending_.horizon(), e.horizon()) : e.horizon());
    pending_.set_completed_iteration(
        has_pending_ ? std::max(pending_.completed_iteration(), e.completed_iteration())
                     : e.completed_iteration());
    pending_.set_state_seq(std::max(pending_.state_seq(), e.state_seq()));
    if (e.notice() != 0) pending_.set_notice(e.notice());
    if (e.interval_ms() != 0) pending_.set_interval_ms(e.interval_ms());
    if (e.heartbeat_timeout_ms() != 0) pending_.set_heartbeat_timeout_ms(e.heartbeat_timeout_ms());
    if (e.synced() != 0) pending_.set_synced(std::max(pending_.synced(), e.synced()));
    has_pending_ = true;
  }
  void StartIfIdle() {
    if (writing_ || !has_pending_ || broken_ || finished_) return;
    current_ = std::move(pending_);
    pending_.Clear();
    has_pending_ = false;
    writing_ = true;
    reactor_->StartWrite(&current_);
  }
  void FinishNow() {
    if (finished_) return;
    finished_ = true;
    reactor_->Finish(finish_);
  }

  std::mutex mu_;
  grpc::ServerBidiReactor<herd::v1::FollowRequest, herd::v1::FollowEvent>* reactor_;
  herd::v1::FollowEvent current_, pending_;
  bool has_pending_ = false, writing_ = false, broken_ = false;
  bool finishing_ = false, finished_ = false;
  grpc::Status finish_;
};

// One process's Follow stream: each message up goes to the core (the first one opens the
// stream there); the core's events go down through the sink.
class FollowReactor final
    : public grpc::ServerBidiReactor<herd::v1::FollowRequest, herd::v1::FollowEvent> {
 public:
  FollowReactor(SchedulerCore* core, grpc::CallbackServerContext* ctx,
                const rpc::BearerTokenCheck& token)
      : core_(core), sink_(std::make_shared<FollowSink>(this)) {
    if (auto st = token.Check(ctx); !st.ok()) {
      sink_->Finish(st);
      return;
    }
    StartRead(&in_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {
      // The process closed its stream, or went away.
      sink_->Finish(grpc::Status::OK);
      return;
    }
    Count("Follow");
    absl::Status st;
    if (id_ == 0) {
      auto id = core_->OpenFollow(in_, sink_);
      if (id.ok()) id_ = *id;
      st = id.status();
    } else {
      st = core_->TakeFollow(id_, in_);
    }
    if (!st.ok()) {
      sink_->Finish(ToGrpc(st));
      return;
    }
    StartRead(&in_);
  }
  void OnWriteDone(bool ok) override { sink_->WriteDone(ok); }
  void OnDone() override {
    if (id_ != 0) core_->CloseFollow(id_);
    sink_->Detach();
    delete this;
  }

 private:
  SchedulerCore* core_;
  std::shared_ptr<FollowSink> sink_;
  herd::v1::FollowRequest in_;
  uint64_t id_ = 0;
};

class SchedulerService final : public AsyncMethods {
 public:
  SchedulerService(SchedulerCore* core, std::string token)
      : core_(core), token_(token, "the scheduler") {}

  grpc::ServerBidiReactor<herd::v1::FollowRequest, herd::v1::FollowEvent>* Follow(
      grpc::CallbackServerContext* ctx) override {
    return new FollowReactor(core_, ctx, token_);
  }

  grpc::Status RegisterNode(ServerContext* ctx, const herd::v1::RegisterNodeRequest* req,
                            herd::v1::RegisterNodeResponse* resp) override {
    Count("RegisterNode");
    return Answer(
        ctx, [&] { return core_->RegisterNode(*req); }, resp);
  }
  grpc::Status Heartbeat(ServerContext* ctx, const herd::v1::HeartbeatRequest* req,
                         herd::v1::HeartbeatResponse* resp) override {
    Count("Heartbeat");
    return Answer(
        ctx, [&] { return core_->Heartbeat(*req); }, resp);
  }
  grpc::Status SubmitJob(ServerContext* ctx, const herd::v1::SubmitJobRequest* req,
                         herd::v1::JobStatus* resp) override {
    Count("SubmitJob");
    return Answer(
        ctx, [&] { return core_->SubmitJob(req->spec()); }, resp);
  }
  grpc::Status GetJob(ServerContext* ctx, const herd::v1::GetJobRequest* req,
                      herd::v1::JobStatus* resp) override {
    Count("GetJob");
    return Answer(
        ctx,
        [&] { return req->brief() ? core_->GetJobBrief(req->name()) : core_->GetJob(req->name()); },
        resp);
  }
  grpc::Status ListJobs(ServerContext* ctx, const herd::v1::ListJobsRequest* req,
                        herd::v1::ListJobsResponse* resp) override {
    Count("ListJobs");
    if (auto st = Authenticate(ctx); !st.ok()) return st;
    if (auto st = core_->Refusal(); !st.ok()) return ToGrpc(st);
    auto page = core_->ListJobs(req->page_token(), limits::kMaxListPageBytes);
    for (auto& job : page.jobs) *resp->add_jobs() = std::move(job);
    resp->set_next_page_token(std::move(page.next_page_token));
    return grpc::Status::OK;
  }
  grpc::Status SetMode(ServerContext* ctx, const herd::v1::SetModeRequest* req,
                       herd::v1::JobStatus* resp) override {
    Count("SetMode");
    return Answer(
        ctx, [&] { return core_->SetMode(*req); }, resp);
  }
  grpc::Status CancelJob(ServerContext* ctx, const herd::v1::CancelJobRequest* req,
                         herd::v1::JobStatus* resp) override {
    Count("CancelJob");
    return Answer(
        ctx, [&] { return core_->CancelJob(req->name(), req->reason()); }, resp);
  }
  grpc::Status DeleteJob(ServerContext* ctx, const herd::v1::DeleteJobRequest* req,
                         herd::v1::DeleteJobResponse*) override {
    Count("DeleteJob");
    if (auto st = Authenticate(ctx); !st.ok()) return st;
    return ToGrpc(core_->DeleteJob(req->name()));
  }
  grpc::Status DeclareModel(ServerContext* ctx, const herd::v1::DeclareModelRequest* req,
                            herd::v1::JobStatus* resp) override {
    Count("DeclareModel");
    return Answer(
        ctx, [&] { return core_->DeclareModel(*req); }, resp);
  }
  grpc::Status FinishWorker(ServerContext* ctx, const herd::v1::FinishWorkerRequest* req,
                            herd::v1::JobStatus* resp) override {
    Count("FinishWorker");
    return Answer(
        ctx, [&] { return core_->FinishWorker(*req); }, resp);
  }
  grpc::Status FailJob(ServerContext* ctx, const herd::v1::FailJobRequest* req,
                       herd::v1::JobStatus* resp) override {
    Count("FailJob");
    return Answer(
        ctx, [&] { return core_->FailJob(*req); }, resp);
  }
  grpc::Status GetPlan(ServerContext* ctx, const herd::v1::GetPlanRequest* req,
                       herd::v1::Plan* resp) override {
    Count("GetPlan");
    return Answer(
        ctx, [&] { return core_->GetPlan(*req); }, resp);
  }
  grpc::Status WatchPlan(ServerContext* ctx, const herd::v1::WatchPlanRequest* req,
                         grpc::ServerWriter<herd::v1::Plan>* writer) override {
    Count("WatchPlan");
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
  grpc::ServerUnaryReactor* Barrier(grpc::CallbackServerContext* ctx,
                                    const herd::v1::BarrierRequest* req,
                                    herd::v1::BarrierResponse* resp) override {
    Count("Barrier");
    auto* reactor = ctx->DefaultReactor();
    if (auto st = Authenticate(ctx); !st.ok()) {
      reactor->Finish(st);
      return reactor;
    }
    core_->BarrierAsync(*req, CallDeadline(ctx, kMaxWait, req->timeout_ms()),
                        [reactor, resp](absl::StatusOr<herd::v1::BarrierResponse> r) {
                          if (r.ok()) *resp = std::move(*r);
                          reactor->Finish(r.ok() ? grpc::Status::OK : ToGrpc(r.status()));
                        });
    return reactor;
  }
  grpc::Status ReportIteration(ServerContext* ctx, const herd::v1::ReportIterationRequest* req,
                               herd::v1::ReportIterationResponse* resp) override {
    Count("ReportIteration");
    return Answer(
        ctx, [&] { return core_->ReportIteration(*req); }, resp);
  }
  grpc::Status RequestCheckpoint(ServerContext* ctx, const herd::v1::RequestCheckpointRequest* req,
                                 herd::v1::CheckpointRecord* resp) override {
    Count("RequestCheckpoint");
    return Answer(
        ctx, [&] { return core_->RequestCheckpoint(*req); }, resp);
  }
  grpc::Status ReportCheckpoint(ServerContext* ctx, const herd::v1::ReportCheckpointRequest* req,
                                herd::v1::ReportCheckpointResponse* resp) override {
    Count("ReportCheckpoint");
    return Answer(
        ctx, [&] { return core_->ReportCheckpoint(*req); }, resp);
  }
  grpc::Status StoreSet(ServerContext* ctx, const herd::v1::StoreSetRequest* req,
                        herd::v1::StoreSetResponse*) override {
    Count("StoreSet");
    if (auto st = Authenticate(ctx); !st.ok()) return st;
    return ToGrpc(core_->StoreSet(req->job(), req->key(), req->value()));
  }
  grpc::ServerUnaryReactor* StoreGet(grpc::CallbackServerContext* ctx,
                                     const herd::v1::StoreGetRequest* req,
                                     herd::v1::StoreGetResponse* resp) override {
    Count("StoreGet");
    auto* reactor = ctx->DefaultReactor();
    if (auto st = Authenticate(ctx); !st.ok()) {
      reactor->Finish(st);
      return reactor;
    }
    core_->StoreGetAsync(req->job(), req->key(), CallDeadline(ctx, kMaxWait, req->timeout_ms()),
                         [reactor, resp](absl::StatusOr<std::string> v) {
                           if (v.ok()) resp->set_value(std::move(*v));
                           reactor->Finish(v.ok() ? grpc::Status::OK : ToGrpc(v.status()));
                         });
    return reactor;
  }
  grpc::ServerUnaryReactor* StoreGetMany(grpc::CallbackServerContext* ctx,
                                         const herd::v1::StoreGetManyRequest* req,
                                         herd::v1::StoreGetManyResponse* resp) override {
    Count("StoreGetMany");
    auto* reactor = ctx->DefaultReactor();
    if (auto st = Authenticate(ctx); !st.ok()) {
      reactor->Finish(st);
      return reactor;
    }
    core_->StoreGetManyAsync(*req, CallDeadline(ctx, kMaxWait, req->timeout_ms()),
                             [reactor, resp](absl::StatusOr<herd::v1::StoreGetManyResponse> r) {
                               if (r.ok()) *resp = std::move(*r);
                               reactor->Finish(r.ok() ? grpc::Status::OK : ToGrpc(r.status()));
                             });
    return reactor;
  }

 private:
  grpc::Status Authenticate(const grpc::ServerContextBase* ctx) const { return token_.Check(ctx); }

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
