#include "bench/control_plane/sim_common.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include "absl/strings/str_format.h"
#include "common/status.h"

namespace herd::bench::control_plane {

absl::StatusOr<std::vector<std::unique_ptr<scheduler::SchedulerClient>>> MakeClients(
    const std::string& address, int workers, int per_channel) {
  std::vector<std::unique_ptr<scheduler::SchedulerClient>> clients;
  const int channels = std::max(1, (workers + per_channel - 1) / per_channel);
  for (int c = 0; c < channels; ++c) {
    scheduler::ClientOptions o;
    o.address = address;
    o.call_timeout = std::chrono::seconds(120);
    o.channel_id = c + 1;  // a connection of its own
    HERD_ASSIGN_OR_RETURN(auto client, scheduler::SchedulerClient::Connect(o));
    clients.push_back(std::move(client));
  }
  return clients;
}

herd::v1::JobSpec BenchJob(const std::string& name, int workers) {
  herd::v1::JobSpec spec;
  spec.set_name(name);
  spec.mutable_mode()->set_mode("allreduce");
  spec.set_workers(workers);
  spec.set_seed(7);
  auto* t = spec.add_tensors();
  t->set_name("w");
  t->add_shape(1024);
  t->set_dtype("fp32");
  spec.mutable_elastic()->set_min_workers(1);
  spec.mutable_elastic()->set_max_workers(workers);
  spec.mutable_elastic()->set_max_failures(3);
  return spec;
}

absl::Status RegisterAll(
    const std::vector<std::unique_ptr<scheduler::SchedulerClient>>& clients, const std::string& job,
    int workers, int per_channel, int ucx_bytes,
    const std::function<void(int, const herd::v1::RegisterNodeResponse&)>& registered) {
  const int threads = std::min(16, workers);
  std::atomic<int> next{0};
  std::mutex mu;
  absl::Status first_error;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (int r = next++; r < workers; r = next++) {
        herd::v1::RegisterNodeRequest req;
        req.set_job(job);
        req.set_role(herd::v1::ROLE_WORKER);
        req.set_name(absl::StrFormat("sim-%d", r));
        req.set_host(absl::StrFormat("host-%d", r / 8));
        req.set_requested_rank(r);
        req.set_ucx_address(std::string(static_cast<size_t>(ucx_bytes), 'u'));
        auto got = clients[static_cast<size_t>(r / per_channel)]->RegisterNode(req);
        if (!got.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          if (first_error.ok()) first_error = got.status();
          return;
        }
        registered(r, *got);
      }
    });
  }
  for (auto& t : pool) t.join();
  return first_error;
}

double Quantile(std::vector<double>& values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t i = std::min(values.size() - 1, static_cast<size_t>(q * values.size()));
  return values[i];
}

}  // namespace herd::bench::control_plane
