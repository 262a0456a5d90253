#include "scheduler/client/scheduler_client.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>

#include "absl/strings/str_format.h"
#include "common/status.h"
#include "herd/v1/scheduler.grpc.pb.h"
#include "proto/rpc/grpc_support.h"

namespace herd::scheduler {
namespace {

class GrpcSchedulerClient final : public SchedulerClient {
 public:
  GrpcSchedulerClient(const ClientOptions& options, std::shared_ptr<grpc::Channel> channel)
      : options_(options),
        channel_(std::move(channel)),
        stub_(herd::v1::Scheduler::NewStub(channel_)) {}

  absl::StatusOr<herd::v1::RegisterNodeResponse> RegisterNode(
      const herd::v1::RegisterNodeRequest& req) override {
    return Unary<herd::v1::RegisterNodeResponse>(req, &Stub::RegisterNode, "RegisterNode");
  }
  absl::StatusOr<herd::v1::HeartbeatResponse> Heartbeat(
      const herd::v1::HeartbeatRequest& req) override {
    return Unary<herd::v1::HeartbeatResponse>(req, &Stub::Heartbeat, "Heartbeat");
  }
  absl::StatusOr<herd::v1::JobStatus> SubmitJob(const herd::v1::JobSpec& spec) override {
    herd::v1::SubmitJobRequest req;
    *req.mutable_spec() = spec;
    return Unary<herd::v1::JobStatus>(req, &Stub::SubmitJob, "SubmitJob");
  }
  absl::StatusOr<herd::v1::JobStatus> GetJob(const std::string& name) override {
    herd::v1::GetJobRequest req;
    req.set_name(name);
    return Unary<herd::v1::JobStatus>(req, &Stub::GetJob, "GetJob");
  }
  absl::StatusOr<herd::v1::JobStatus> GetJobBrief(const std::string& name) override {
    herd::v1::GetJobRequest req;
    req.set_name(name);
    req.set_brief(true);
    return Unary<herd::v1::JobStatus>(req, &Stub::GetJob, "GetJob");
  }
  absl::StatusOr<herd::v1::ListJobsResponse> ListJobs() override {
    // The scheduler answers in pages (each below a client's message limit); all of them.
    herd::v1::ListJobsResponse all;
    herd::v1::ListJobsRequest req;
    // A page holds at least one job, so this ends; the bound guards against a broken server.
    for (int page = 0; page < 100000; ++page) {
      HERD_ASSIGN_OR_RETURN(herd::v1::ListJobsResponse resp,
                            Unary<herd::v1::ListJobsResponse>(req, &Stub::ListJobs, "ListJobs"));
      for (auto& job : *resp.mutable_jobs()) *all.add_jobs() = std::move(job);
      if (resp.next_page_token().empty() || resp.next_page_token() == req.page_token()) break;
      req.set_page_token(resp.next_page_token());
    }
    return all;
  }
  absl::StatusOr<herd::v1::JobStatus> SetMode(const herd::v1::SetModeRequest& req) override {
    return Unary<herd::v1::JobStatus>(req, &Stub::SetMode, "SetMode");
  }
  absl::StatusOr<herd::v1::JobStatus> CancelJob(const std::string& name,
                                                const std::string& reason) override {
    herd::v1::CancelJobRequest req;
    req.set_name(name);
    req.set_reason(reason);
    return Unary<herd::v1::JobStatus>(req, &Stub::CancelJob, "CancelJob");
  }
  absl::Status DeleteJob(const std::string& name) override {
    herd::v1::DeleteJobRequest req;
    req.set_name(name);
    return Unary<herd::v1::DeleteJobResponse>(req, &Stub::DeleteJob, "DeleteJob").status();
  }
  absl::StatusOr<herd::v1::JobStatus> DeclareModel(
      const herd::v1::DeclareModelRequest& req) override {
    return Unary<herd::v1::JobStatus>(req, &Stub::DeclareModel, "DeclareModel");
  }
  absl::StatusOr<herd::v1::JobStatus> FinishWorker(
      const herd::v1::FinishWorkerRequest& req) override {
    return Unary<herd::v1::JobStatus>(req, &Stub::FinishWorker, "FinishWorker");
  }
  absl::StatusOr<herd::v1::JobStatus> FailJob(const herd::v1::FailJobRequest& req) override {
    return Unary<herd::v1::JobStatus>(req, &Stub::FailJob, "FailJob");
  }
  absl::StatusOr<herd::v1::CheckpointRecord> RequestCheckpoint(
      const herd::v1::RequestCheckpointRequest& req) override {
    return Unary<herd::v1::CheckpointRecord>(req, &Stub::RequestCheckpoint, "RequestCheckpoint");
  }
  absl::StatusOr<herd::v1::ReportCheckpointResponse> ReportCheckpoint(
      const herd::v1::ReportCheckpointRequest& req) override {
    return Unary<herd::v1::ReportCheckpointResponse>(req, &Stub::ReportCheckpoint,
                                                     "ReportCheckpoint");
  }
  absl::StatusOr<herd::v1::Plan> GetPlan(const herd::v1::GetPlanRequest& req) override {
    return Unary<herd::v1::Plan>(req, &Stub::GetPlan, "GetPlan");
  }
  absl::Status WatchPlan(const herd::v1::WatchPlanRequest& req, Deadline deadline,
                         const std::function<bool(const herd::v1::Plan&)>& on_plan) override {
    grpc::ClientContext ctx;
    Prepare(ctx, deadline);
    auto reader = stub_->WatchPlan(&ctx, req);
    herd::v1::Plan plan;
    while (reader->Read(&plan)) {
      if (!on_plan(plan)) {
        ctx.TryCancel();
        reader->Finish().ok();  // drains the cancelled stream
        return absl::OkStatus();
      }
    }
    const grpc::Status st = reader->Finish();
    if (st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) return absl::OkStatus();
    return FromGrpc(st, "WatchPlan");
  }
  absl::StatusOr<herd::v1::BarrierResponse> Barrier(const herd::v1::BarrierRequest& req,
                                                    Deadline deadline) override {
    herd::v1::BarrierRequest bounded = req;
    if (bounded.timeout_ms() <= 0) bounded.set_timeout_ms(WaitMs(deadline));
    return Unary<herd::v1::BarrierResponse>(bounded, &Stub::Barrier, "Barrier", deadline);
  }
  absl::StatusOr<herd::v1::ReportIterationResponse> ReportIteration(
      const herd::v1::ReportIterationRequest& req) override {
    return Unary<herd::v1::ReportIterationResponse>(req, &Stub::ReportIteration, "ReportIteration");
  }
  absl::Status StoreSet(const std::string& job, const std::string& key,
                        const std::string& value) override {
    herd::v1::StoreSetRequest req;
    req.set_job(job);
    req.set_key(key);
    req.set_value(value);
    return Unary<herd::v1::StoreSetResponse>(req, &Stub::StoreSet, "StoreSet").status();
  }
  absl::StatusOr<std::string> StoreGet(const std::string& job, const std::string& key,
                                       Deadline deadline) override {
    herd::v1::StoreGetRequest req;
    req.set_job(job);
    req.set_key(key);
    req.set_timeout_ms(WaitMs(deadline));
    auto resp = Unary<herd::v1::StoreGetResponse>(req, &Stub::StoreGet, "StoreGet", deadline);
    if (!resp.ok()) return resp.status();
    return std::move(*resp->mutable_value());
  }
  absl::StatusOr<herd::v1::StoreGetManyResponse> StoreGetMany(const std::string& job,
                                                              const std::vector<std::string>& keys,
                                                              Deadline deadline,
                                                              bool partial) override {
    herd::v1::StoreGetManyRequest req;
    req.set_job(job);
    req.mutable_keys()->Add(keys.begin(), keys.end());
    req.set_timeout_ms(WaitMs(deadline));
    req.set_partial(partial);
    return Unary<herd::v1::StoreGetManyResponse>(req, &Stub::StoreGetMany, "StoreGetMany",
                                                 deadline);
  }
  absl::Status CheckHealth() override {
    // grpc.health.v1.Health/Check with an empty service name, spoken through the generic
    // stub: its request and response are a string field 1 and an enum field 1.
    grpc::ClientContext ctx;
    Prepare(ctx, Deadline::After(options_.call_timeout));
    grpc::GenericStub generic(channel_);
    // The empty message (service ""); a ByteBuffer without a slice is not a valid message.
    grpc::Slice empty(std::string{});
    grpc::ByteBuffer request(&empty, 1);
    grpc::ByteBuffer response;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    grpc::Status st;
    generic.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                      &response, [&](grpc::Status s) {
                        std::lock_guard<std::mutex> lock(mu);
                        st = std::move(s);
                        done = true;
                        cv.notify_all();
                      });
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
    if (!st.ok()) return FromGrpc(st, "Health/Check");
    std::vector<grpc::Slice> slices;
    if (!response.Dump(&slices).ok()) return absl::InternalError("unreadable health response");
    std::string bytes;
    for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    // SERVING = 1, encoded as field 1 varint: 0x08 0x01.
    if (bytes != std::string("\x08\x01", 2)) {
      return absl::UnavailableError(
          absl::StrFormat("scheduler at %s reports it is not serving", options_.address));
    }
    return absl::OkStatus();
  }
  uint64_t SeenStateSeq() const override { return seen_state_seq_.load(); }
  void HearStateSeq(uint64_t seq) override { Heard(seq); }

  // One Follow stream as a gRPC callback reactor. It keeps itself alive (self_) until gRPC's
  // OnDone, so the caller may drop its reference at any time.
  class GrpcFollowCall final
      : public FollowCall,
        public grpc::ClientBidiReactor<herd::v1::FollowRequest, herd::v1::FollowEvent> {
   public:
    GrpcFollowCall(const GrpcSchedulerClient& client, FollowHandler* handler)
        : client_(client), handler_(handler) {
      client.Prepare(ctx_, Deadline::Infinite());
    }
    void Start(herd::v1::Scheduler::Stub& stub, std::shared_ptr<GrpcFollowCall> self) {
      self_ = std::move(self);
      stub.async()->Follow(&ctx_, this);
      // Writes come from outside the reactions too (the heartbeat clock, an iteration loop
      // asking for a horizon): the hold keeps gRPC from finishing the call until the stream is
      // ending and Write refuses, since an operation started after OnDone is undefined (it
      // released the call's last reference twice and aborted a shard at a job's end).
      AddHold();
      StartRead(&in_);
      StartCall();
    }
    bool Write(const herd::v1::FollowRequest& msg) override {
      std::lock_guard<std::mutex> lock(mu_);
      if (ending_) return false;
      out_ = msg;
      StartWrite(&out_);
      return true;
    }
    void Cancel() override { ctx_.TryCancel(); }  // the read fails, and the hold goes
    void OnReadDone(bool ok) override {
      if (ok) {
        handler_->OnEvent(in_);
        StartRead(&in_);
        return;
      }
      // The stream ends (broken, refused, cancelled): no write starts from now on, and
      // OnDone follows once the write in flight, if any, is done. The hold goes outside the
      // lock: OnDone may run within RemoveHold and free this.
      {
        std::lock_guard<std::mutex> lock(mu_);
        ending_ = true;
      }
      RemoveHold();
    }
    void OnWriteDone(bool ok) override { handler_->OnWritten(ok); }
    void OnDone(const grpc::Status& st) override {
      handler_->OnEnded(client_.FromGrpc(st, "Follow"));
      self_.reset();  // may delete this
    }

   private:
    const GrpcSchedulerClient& client_;
    FollowHandler* handler_;
    grpc::ClientContext ctx_;
    herd::v1::FollowRequest out_;
    herd::v1::FollowEvent in_;
    std::mutex mu_;
    bool ending_ = false;  // guarded by mu_
    std::shared_ptr<GrpcFollowCall> self_;
  };
  std::shared_ptr<FollowCall> StartFollow(FollowHandler* handler) override {
    auto call = std::make_shared<GrpcFollowCall>(*this, handler);
    call->Start(*stub_, call);
    return call;
  }

 private:
  using Stub = herd::v1::Scheduler::Stub;

  // Keeps the highest state sequence number heard (answers may arrive out of order).
  void Heard(uint64_t seq) {
    uint64_t known = seen_state_seq_.load();
    while (seq > known && !seen_state_seq_.compare_exchange_weak(known, seq)) {
    }
  }

  // The wait the server is asked for: the deadline's remaining time, at least 1 ms (0 would
  // mean "the call's deadline", which is set a little later on purpose).
  static int64_t WaitMs(Deadline deadline) {
    if (deadline.infinite()) return 0;
    return std::max<int64_t>(
        1, std::chrono::duration_cast<std::chrono::milliseconds>(deadline.remaining()).count());
  }

  void Prepare(grpc::ClientContext& ctx, Deadline deadline) const {
    if (!options_.token.empty()) ctx.AddMetadata("authorization", "Bearer " + options_.token);
    if (!deadline.infinite()) {
      ctx.set_deadline(std::chrono::system_clock::now() + deadline.remaining());
    }
  }

  absl::Status FromGrpc(const grpc::Status& st, std::string_view method) const {
    if (st.ok()) return absl::OkStatus();
    return absl::Status(
        static_cast<absl::StatusCode>(st.error_code()),
        absl::StrFormat("scheduler at %s, %s: %s", options_.address, method, st.error_message()));
  }

  template <typename Resp, typename Req, typename Method>
  absl::StatusOr<Resp> Unary(const Req& given, Method method, std::string_view name,
                             std::optional<Deadline> deadline = std::nullopt) {
    const Req* req = &given;
    Req witnessed;
    if constexpr (requires(Req r) { r.set_seen_state_seq(uint64_t{0}); }) {
      witnessed = given;
      witnessed.set_seen_state_seq(std::max(given.seen_state_seq(), seen_state_seq_.load()));
      req = &witnessed;
    }
    grpc::ClientContext ctx;
    // A blocking call gets a little longer than the wait it asks for, so the server's own
    // DEADLINE_EXCEEDED (which names what it waited for) arrives first.
    Prepare(ctx, deadline ? Deadline::After(deadline->remaining() + std::chrono::seconds(2))
                          : Deadline::After(options_.call_timeout));
    Resp resp;
    const grpc::Status st = (stub_.get()->*method)(&ctx, *req, &resp);
    if (!st.ok()) return FromGrpc(st, name);
    if constexpr (requires(const Resp& r) { r.state_seq(); }) Heard(resp.state_seq());
    return resp;
  }

  const ClientOptions options_;
  std::atomic<uint64_t> seen_state_seq_{0};
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<Stub> stub_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SchedulerClient>> SchedulerClient::Connect(
    const ClientOptions& options) {
  // gRPC stays initialised for the process's life: without this, a process whose last client
  // was destroyed aborted on one of gRPC's own threads in grpc_cq_internal_unref ('prior > 0'),
  // 3 times in 30 runs of a test's teardown (0 in 30 with it).
  static const bool kept = [] {
    grpc_init();
    return true;
  }();
  (void)kept;
  if (options.address.empty()) {
    return absl::InvalidArgumentError("no scheduler address: pass --scheduler HOST:PORT");
  }
  auto creds = rpc::ChannelCredentialsFor(options.tls, options.tls_ca_file);
  if (!creds.ok()) return creds.status();
  grpc::ChannelArguments args;
  // Reconnect quickly after a scheduler restart instead of backing off for up to two minutes.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  if (options.channel_id != 0) args.SetInt("herd.channel_id", options.channel_id);
  // A call that meets a connection broken by a scheduler restart fails with UNAVAILABLE
  // without having run; retry those (about 1.5 s in all) so a restart is ridden out. The
  // scheduler's own UNAVAILABLE means "shutting down": retrying reaches its successor.
  args.SetServiceConfigJSON(R"({"methodConfig": [{
      "name": [{"service": "herd.v1.Scheduler"}],
      "retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.1s", "maxBackoff": "1s",
                      "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]})");
  auto channel = grpc::CreateCustomChannel(options.address, *creds, args);
  return std::unique_ptr<SchedulerClient>(new GrpcSchedulerClient(options, std::move(channel)));
}

}  // namespace herd::scheduler
