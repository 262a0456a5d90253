#include "bench/control_plane/bootstrap_load.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_format.h"
#include "common/status.h"
#include "transport/ucx/bootstrap_peers.h"
#include "worker/scheduler_store.h"

namespace herd::bench {
namespace {

using Clock = std::chrono::steady_clock;

// The scheduler's user + system CPU seconds, -1 when it cannot be read.
double ProcessCpuSeconds(pid_t pid) {
  if (pid <= 0) return -1;
  std::ifstream in(absl::StrFormat("/proc/%d/stat", pid));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Fields after the command name (which may hold spaces) start after the last ')'.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  double utime = -1, stime = -1;
  // Field 3 is the state; utime and stime are fields 14 and 15.
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  if (utime < 0 || stime < 0) return -1;
  return (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

std::string KeyOf(int rank) { return absl::StrFormat("bootstrap-load/ucx/%d", rank); }

// What rank r publishes: `bytes` bytes that name it (so a read can be checked).
std::string RecordOf(int rank, size_t bytes) {
  std::string record = absl::StrFormat("herd-ucx 1\nbench-host\n%d\n", rank);
  while (record.size() < bytes)
    record.push_back(static_cast<char>('a' + (rank + record.size()) % 26));
  record.resize(bytes);
  return record;
}

// Runs body(rank) for every rank of `ranks` on `threads` threads; the first error wins.
template <typename Body>
absl::Status ForRanks(const std::vector<int>& ranks, int threads, Body body) {
  std::atomic<size_t> next{0};
  std::mutex mu;
  absl::Status first;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (size_t i; (i = next.fetch_add(1)) < ranks.size();) {
        absl::Status st = body(t, ranks[i]);
        if (!st.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          if (first.ok()) first = st;
          return;
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  return first;
}

}  // namespace

std::string_view BootstrapProtocolName(BootstrapProtocol protocol) {
  return protocol == BootstrapProtocol::kGetMany ? "get_many" : "per_peer_get";
}

absl::StatusOr<BootstrapLoadResult> BootstrapLoad(const BootstrapLoadOptions& o) {
  if (o.ranks < 2 || o.ranks > 16384) {
    return absl::InvalidArgumentError(
        absl::StrFormat("bootstrap load: %d ranks; use 2..16384", o.ranks));
  }
  if (o.client_threads < 1 || o.channels < 1 || o.read_ranks < 0) {
    return absl::InvalidArgumentError("bootstrap load: threads and channels must be >= 1");
  }
  const Deadline deadline = Deadline::After(o.timeout);
  scheduler::ClientOptions co;
  co.address = o.scheduler_address;
  co.token = o.token;
  co.call_timeout = std::chrono::seconds(60);
  std::vector<std::shared_ptr<CountingSchedulerClient>> clients;
  std::vector<std::shared_ptr<transport::Store>> stores;
  HERD_ASSIGN_OR_RETURN(std::unique_ptr<scheduler::SchedulerClient> admin,
                        scheduler::SchedulerClient::Connect(co));

  // A job of `ranks` workers holds the store; nobody registers, so it stays PENDING.
  const std::string job =
      absl::StrFormat("bootload-%d-%d-%s", ::getpid(), o.ranks,
                      o.protocol == BootstrapProtocol::kGetMany ? "many" : "each");
  herd::v1::JobSpec spec;
  spec.set_name(job);
  spec.set_workers(o.ranks);
  spec.set_servers(0);
  spec.mutable_mode()->set_mode("allreduce");
  auto* t = spec.add_tensors();
  t->set_name("w");
  t->add_shape(4);
  t->set_dtype("fp32");
  HERD_RETURN_IF_ERROR(admin->SubmitJob(spec).status());
  for (int c = 0; c < o.channels; ++c) {
    HERD_ASSIGN_OR_RETURN(std::unique_ptr<scheduler::SchedulerClient> client,
                          scheduler::SchedulerClient::Connect(co));
    clients.push_back(std::make_shared<CountingSchedulerClient>(std::move(client)));
    stores.push_back(worker::MakeSchedulerStore(clients.back(), job));
  }
  auto store_of = [&](int thread) { return stores[static_cast<size_t>(thread) % stores.size()]; };
  auto total = [&](auto member) {
    int64_t n = 0;
    for (const auto& c : clients) n += (c.get()->*member).load();
    return n;
  };

  BootstrapLoadResult result;
  result.ranks = o.ranks;
  result.protocol = o.protocol;
  std::vector<int> all(o.ranks);
  for (int r = 0; r < o.ranks; ++r) all[r] = r;
  const int readers = o.read_ranks == 0 ? o.ranks : std::min(o.read_ranks, o.ranks);
  std::vector<int> sample;
  for (int i = 0; i < readers; ++i) {
    sample.push_back(static_cast<int>(static_cast<int64_t>(i) * o.ranks / readers));
  }
  result.read_ranks = readers;

  const double cpu0 = ProcessCpuSeconds(o.scheduler_pid);
  auto start = Clock::now();
  absl::Status published = ForRanks(all, o.client_threads, [&](int thread, int r) {
    absl::Status st = store_of(thread)->Set(KeyOf(r), RecordOf(r, o.record_bytes));
    if (!st.ok()) return absl::Status(st.code(), absl::StrFormat("rank %d: %s", r, st.message()));
    return absl::OkStatus();
  });
  result.publish_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const double cpu1 = ProcessCpuSeconds(o.scheduler_pid);
  const int64_t sets = total(&CountingSchedulerClient::store_sets);

  std::atomic<int64_t> bytes{0};
  start = Clock::now();
  absl::Status read = published;
  if (read.ok()) {
    read = ForRanks(sample, o.client_threads, [&](int thread, int r) -> absl::Status {
      transport::Store& store = *store_of(thread);
      std::vector<int> peers;
      if (o.protocol == BootstrapProtocol::kGetMany) {
        peers = transport::ucx::BootstrapPeers(r, o.ranks);
        std::vector<std::string> keys;
        for (int p : peers) keys.push_back(KeyOf(p));
        auto values = store.GetMany(keys, deadline);
        if (!values.ok()) {
          return absl::Status(values.status().code(),
                              absl::StrFormat("rank %d: %s", r, values.status().message()));
        }
        for (size_t i = 0; i < peers.size(); ++i) {
          if ((*values)[i] != RecordOf(peers[i], o.record_bytes)) {
            return absl::DataLossError(
                absl::StrFormat("rank %d read a wrong record of rank %d", r, peers[i]));
          }
          bytes += static_cast<int64_t>((*values)[i].size());
        }
        return absl::OkStatus();
      }
      for (int p = 0; p < o.ranks; ++p) {
        if (p == r) continue;
        auto value = store.Get(KeyOf(p), deadline);
        if (!value.ok()) {
          return absl::Status(value.status().code(),
                              absl::StrFormat("rank %d: %s", r, value.status().message()));
        }
        if (*value != RecordOf(p, o.record_bytes)) {
          return absl::DataLossError(
              absl::StrFormat("rank %d read a wrong record of rank %d", r, p));
        }
        bytes += static_cast<int64_t>(value->size());
      }
      return absl::OkStatus();
    });
  }
  result.read_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const double cpu2 = ProcessCpuSeconds(o.scheduler_pid);
  (void)admin->CancelJob(job, "bootstrap load measured");
  (void)admin->DeleteJob(job);
  HERD_RETURN_IF_ERROR(read);

  const int64_t reads = total(&CountingSchedulerClient::store_gets) +
                        total(&CountingSchedulerClient::store_get_manys);
  result.rpcs_per_rank = static_cast<double>(sets) / o.ranks + static_cast<double>(reads) / readers;
  result.bytes_read_per_rank = static_cast<double>(bytes.load()) / readers;
  if (cpu0 >= 0 && cpu1 >= 0 && cpu2 >= 0) {
    const double scale = static_cast<double>(o.ranks) / readers;
    result.scheduler_cpu_publish_seconds = cpu1 - cpu0;
    result.scheduler_cpu_read_seconds = (cpu2 - cpu1) * scale;
    result.scheduler_cpu_scaled = readers < o.ranks;
    result.scheduler_cpu_per_call_us = (cpu2 - cpu0) / static_cast<double>(sets + reads) * 1e6;
  }
  return result;
}

std::string BootstrapLoadJson(const BootstrapLoadResult& r) {
  return absl::StrFormat(
      "{\"bench\":\"bootstrap_load\",\"protocol\":\"%s\",\"ranks\":%d,\"read_ranks\":%d,"
      "\"bootstrap_rpcs_per_rank\":%.2f,\"bytes_read_per_rank\":%.0f,\"publish_s\":%.3f,"
      "\"read_s\":%.3f,\"scheduler_cpu_publish_s\":%.3f,\"scheduler_cpu_read_s\":%.3f,"
      "\"scheduler_cpu_read_scaled\":%s,\"scheduler_cpu_per_call_us\":%.1f}",
      BootstrapProtocolName(r.protocol), r.ranks, r.read_ranks, r.rpcs_per_rank,
      r.bytes_read_per_rank, r.publish_seconds, r.read_seconds, r.scheduler_cpu_publish_seconds,
      r.scheduler_cpu_read_seconds, r.scheduler_cpu_scaled ? "true" : "false",
      r.scheduler_cpu_per_call_us);
}

// --- CountingSchedulerClient: forwarding ---------------------------------------------------

#define HERD_FORWARD(counter, call) \
  do {                              \
    ++(counter);                    \
    return inner_->call;            \
  } while (0)

absl::StatusOr<herd::v1::RegisterNodeResponse> CountingSchedulerClient::RegisterNode(
    const herd::v1::RegisterNodeRequest& req) {
  HERD_FORWARD(others, RegisterNode(req));
}
absl::StatusOr<herd::v1::HeartbeatResponse> CountingSchedulerClient::Heartbeat(
    const herd::v1::HeartbeatRequest& req) {
  HERD_FORWARD(others, Heartbeat(req));
}
absl::StatusOr<herd::v1::JobStatus> CountingSchedulerClient::SubmitJob(
    const herd::v1::JobSpec& spec) {
  HERD_FORWARD(others, SubmitJob(spec));
}
absl::StatusOr<herd::v1::JobStatus> CountingSchedulerClient::GetJob(const std::string& name) {
  HERD_FORWARD(others, GetJob(name));
}
absl::StatusOr<herd::v1::JobStatus> CountingSchedulerClient::GetJobBrief(const std::string& name) {
  HERD_FORWARD(others, GetJobBrief(name));
}
absl::StatusOr<herd::v1::ListJobsResponse> CountingSchedulerClient::ListJobs() {
  HERD_FORWARD(others, ListJobs());
}
absl::StatusOr<herd::v1::JobStatus> CountingSchedulerClient::SetMode(
    const herd::v1::SetModeRequest& req) {
  HERD_FORWARD(others, SetMode(req));
}
absl::StatusOr<herd::v1::JobStatus> CountingSchedulerClient::CancelJob(const std::string& name,
                                                                       const std::string& reason) {
  HERD_FORWARD(others, CancelJob(name, reason));
}
absl::Status CountingSchedulerClient::DeleteJob(const std::string& name) {
  HERD_FORWARD(others, DeleteJob(name));
}
absl::StatusOr<herd::v1::JobStatus> CountingSchedulerClient::DeclareModel(
    const herd::v1::DeclareModelRequest& req) {
  HERD_FORWARD(others, DeclareModel(req));
}
absl::StatusOr<herd::v1::JobStatus> CountingSchedulerClient::FinishWorker(
    const herd::v1::FinishWorkerRequest& req) {
  HERD_FORWARD(others, FinishWorker(req));
}
absl::StatusOr<herd::v1::JobStatus> CountingSchedulerClient::FailJob(
    const herd::v1::FailJobRequest& req) {
  HERD_FORWARD(others, FailJob(req));
}
absl::StatusOr<herd::v1::Plan> CountingSchedulerClient::GetPlan(
    const herd::v1::GetPlanRequest& req) {
  HERD_FORWARD(others, GetPlan(req));
}
absl::Status CountingSchedulerClient::WatchPlan(
    const herd::v1::WatchPlanRequest& req, Deadline deadline,
    const std::function<bool(const herd::v1::Plan&)>& on_plan) {
  HERD_FORWARD(others, WatchPlan(req, deadline, on_plan));
}
absl::StatusOr<herd::v1::BarrierResponse> CountingSchedulerClient::Barrier(
    const herd::v1::BarrierRequest& req, Deadline deadline) {
  HERD_FORWARD(others, Barrier(req, deadline));
}
absl::StatusOr<herd::v1::ReportIterationResponse> CountingSchedulerClient::ReportIteration(
    const herd::v1::ReportIterationRequest& req) {
  HERD_FORWARD(others, ReportIteration(req));
}
absl::Status CountingSchedulerClient::StoreSet(const std::string& job, const std::string& key,
                                               const std::string& value) {
  HERD_FORWARD(store_sets, StoreSet(job, key, value));
}
absl::StatusOr<std::string> CountingSchedulerClient::StoreGet(const std::string& job,
                                                              const std::string& key,
                                                              Deadline deadline) {
  HERD_FORWARD(store_gets, StoreGet(job, key, deadline));
}
absl::StatusOr<herd::v1::StoreGetManyResponse> CountingSchedulerClient::StoreGetMany(
    const std::string& job, const std::vector<std::string>& keys, Deadline deadline, bool partial) {
  HERD_FORWARD(store_get_manys, StoreGetMany(job, keys, deadline, partial));
}
absl::StatusOr<herd::v1::CheckpointRecord> CountingSchedulerClient::RequestCheckpoint(
    const herd::v1::RequestCheckpointRequest& req) {
  HERD_FORWARD(others, RequestCheckpoint(req));
}
absl::StatusOr<herd::v1::ReportCheckpointResponse> CountingSchedulerClient::ReportCheckpoint(
    const herd::v1::ReportCheckpointRequest& req) {
  HERD_FORWARD(others, ReportCheckpoint(req));
}
absl::Status CountingSchedulerClient::CheckHealth() { HERD_FORWARD(others, CheckHealth()); }
uint64_t CountingSchedulerClient::SeenStateSeq() const { return inner_->SeenStateSeq(); }
void CountingSchedulerClient::HearStateSeq(uint64_t seq) { inner_->HearStateSeq(seq); }
std::shared_ptr<scheduler::SchedulerClient::FollowCall> CountingSchedulerClient::StartFollow(
    FollowHandler* handler) {
  others.fetch_add(1, std::memory_order_relaxed);
  return inner_->StartFollow(handler);
}

#undef HERD_FORWARD

}  // namespace herd::bench
