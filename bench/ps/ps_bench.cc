#include "bench/ps/ps_bench.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "absl/strings/str_format.h"
#include "bench/result.h"
#include "common/json.h"
#include "common/status.h"
#include "plan/shard_map.h"
#include "server/client/sharded_client.h"
#include "server/engine.h"
#include "server/service.h"
#include "server/state/shard_store.h"

namespace herd::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Shard {
  std::unique_ptr<server::ShardStore> store;
  std::unique_ptr<server::Engine> engine;
  std::unique_ptr<server::ShardServer> server;  // destroyed first
};

struct Config {
  std::string mode, durability;
  int shards = 1, workers = 1;
  int64_t bytes = 0;
};

struct Result {
  double push_s = 0, pull_s = 0;
};

// Runs fn(i) on `n` threads at once; the first error wins.
absl::Status Parallel(int n, const std::function<absl::Status(int)>& fn) {
  std::vector<absl::Status> st(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) threads.emplace_back([&, i] { st[i] = fn(i); });
  for (auto& t : threads) t.join();
  for (const auto& s : st) HERD_RETURN_IF_ERROR(s);
  return absl::OkStatus();
}

absl::StatusOr<Result> RunOne(const PsBenchOptions& o, const Config& c, const std::string& dir) {
  const int64_t elements = c.bytes / 4;
  auto chunks = plan::ShardMap({plan::TensorLayout{elements, 4}}, o.chunk_bytes, c.shards);
  server::ShardConfig config;
  config.job = "bench";
  config.workers = c.workers;
  config.mode = c.mode == "ps_sync"    ? server::Mode::kSync
                : c.mode == "ps_async" ? server::Mode::kAsync
                                       : server::Mode::kEc;
  config.staleness = server::ShardConfig::kInfiniteStaleness;
  HERD_ASSIGN_OR_RETURN(config.compressor, compression::ParseCompressor(o.compressor));
  HERD_ASSIGN_OR_RETURN(config.durability, server::ParseDurability(c.durability));
  config.optimizer.kind = server::OptimizerConfig::Kind::kSgd;
  config.optimizer.learning_rate = 1e-3;
  server::ShardedOptions client;
  client.job = "bench";
  for (const auto& ch : chunks) {
    config.keys[server::KeyId{ch.tensor, ch.chunk}] = {ch.count, ch.server};
    client.chunks.push_back({server::KeyId{ch.tensor, ch.chunk}, ch.offset, ch.count, ch.server});
  }

  std::vector<Shard> shards(c.shards);
  for (int s = 0; s < c.shards; ++s) {
    auto cfg = config;
    cfg.shard = s;
    const std::string state = dir + "/shard" + std::to_string(s);
    std::filesystem::remove_all(state);
    HERD_ASSIGN_OR_RETURN(shards[s].store, server::ShardStore::Open(state));
    shards[s].engine = server::Engine::Create(cfg, shards[s].store.get());
    server::ServiceOptions so;
    HERD_ASSIGN_OR_RETURN(shards[s].server, server::ShardServer::Start(so));
    shards[s].server->SetEngine(shards[s].engine.get());
    client.addresses.push_back("127.0.0.1:" + std::to_string(shards[s].server->port()));
  }
  // Leave the shards down in order whatever happens below.
  struct Down {
    std::vector<Shard>& s;
    ~Down() {
      for (auto& x : s) x.server->Shutdown();
    }
  } down{shards};

  std::vector<std::unique_ptr<server::ShardedPsClient>> workers;
  for (int w = 0; w < c.workers; ++w) {
    auto opts = client;
    opts.worker = w;
    opts.client.call_timeout = std::chrono::minutes(5);
    HERD_ASSIGN_OR_RETURN(auto wc, server::ShardedPsClient::Connect(opts));
    workers.push_back(std::move(wc));
  }
  std::vector<std::vector<float>> model = {std::vector<float>(elements)};
  for (int64_t i = 0; i < elements; ++i) model[0][i] = 0.001f * static_cast<float>(i % 1000);
  HERD_RETURN_IF_ERROR(workers[0]->Init(model));
  std::vector<std::vector<float>> grads = {std::vector<float>(elements)};
  for (int64_t i = 0; i < elements; ++i) grads[0][i] = 1e-3f * static_cast<float>((i % 17) - 8);
  const bool ec = config.mode == server::Mode::kEc;
  const compression::Compressor comp = config.compressor;

  std::vector<double> push_s, pull_s;
  for (int it = 0; it <= o.iters; ++it) {  // iteration 0 warms up
    const auto t0 = Clock::now();
    HERD_RETURN_IF_ERROR(Parallel(
        c.workers, [&](int w) { return workers[w]->Push(it, grads, ec ? &comp : nullptr); }));
    const auto t1 = Clock::now();
    HERD_RETURN_IF_ERROR(Parallel(c.workers, [&](int w) -> absl::Status {
      return Parallel(c.shards, [&](int s) -> absl::Status {
        herd::v1::PullRequest req;
        req.set_job("bench");
        req.set_worker(w);
        req.set_min_version(config.mode == server::Mode::kAsync ? 0 : it + 1);
        return workers[w]->shard(s).Pull(req).status();
      });
    }));
    const auto t2 = Clock::now();
    if (it == 0) continue;
    push_s.push_back(std::chrono::duration<double>(t1 - t0).count());
    pull_s.push_back(std::chrono::duration<double>(t2 - t1).count());
  }
  return Result{Median(push_s), Median(pull_s)};
}

std::string Size(int64_t bytes) {
  return bytes >= (1 << 20) ? absl::StrFormat("%d MiB", bytes >> 20)
                            : absl::StrFormat("%d KiB", bytes >> 10);
}

}  // namespace

absl::Status RunPsBench(const PsBenchOptions& o) {
  std::string dir = o.state_dir;
  const bool own_dir = dir.empty();
  if (own_dir) {
    dir = (std::filesystem::temp_directory_path() / ("herd_bench_ps_" + std::to_string(getpid())))
              .string();
  }
  std::filesystem::create_directories(dir);
  if (!o.json) {
    std::printf("%-9s %-16s %6s %7s %9s %10s %10s %10s %10s\n", "mode", "durability", "shards",
                "workers", "size", "push ms", "push Gb/s", "pull ms", "pull Gb/s");
  }
  absl::Status failed;
  for (const auto& mode : o.modes) {
    for (const auto& durability : o.durabilities) {
      for (int shards : o.shards) {
        for (int workers : o.workers) {
          for (int64_t bytes : o.sizes) {
            Config c{mode, durability, shards, workers, bytes};
            auto r = RunOne(o, c, dir);
            if (!r.ok()) {
              failed = r.status();
              std::fprintf(stderr, "herd bench ps: %s %s %d shards %d workers %s: %s\n",
                           mode.c_str(), durability.c_str(), shards, workers, Size(bytes).c_str(),
                           std::string(r.status().message()).c_str());
              continue;
            }
            const double moved_bits = 8.0 * static_cast<double>(bytes) * workers;
            const double push_gbps = moved_bits / r->push_s / 1e9;
            const double pull_gbps = moved_bits / r->pull_s / 1e9;
            if (o.json) {
              json::Object j;
              j.Add("mode", mode)
                  .Add("durability", durability)
                  .Add("shards", shards)
                  .Add("workers", workers)
                  .Add("bytes", bytes)
                  .Add("iters", o.iters)
                  .Add("push_s", r->push_s)
                  .Add("pull_s", r->pull_s)
                  .Add("push_gbps", push_gbps)
                  .Add("pull_gbps", pull_gbps);
              if (mode == "ps_ec") j.Add("compressor", o.compressor);
              std::printf("%s\n", j.Write().c_str());
            } else {
              std::printf("%-9s %-16s %6d %7d %9s %10.1f %10.2f %10.1f %10.2f\n", mode.c_str(),
                          durability.c_str(), shards, workers, Size(bytes).c_str(), r->push_s * 1e3,
                          push_gbps, r->pull_s * 1e3, pull_gbps);
            }
            std::fflush(stdout);
          }
        }
      }
    }
  }
  if (own_dir) std::filesystem::remove_all(dir);
  return failed;
}

}  // namespace herd::bench
