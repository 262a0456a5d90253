#include "server/client/sharded_client.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <thread>

#include "absl/strings/str_format.h"
#include "algorithms/compression/error_feedback.h"
#include "common/logging.h"
#include "common/status.h"

namespace herd::server {
namespace {

using herd::v1::PullChunk;
using herd::v1::PushChunk;

std::string BytesOf(const float* data, int64_t count) {
  return std::string(reinterpret_cast<const char*>(data), static_cast<size_t>(count) * 4);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShardedPsClient>> ShardedPsClient::Connect(ShardedOptions options) {
  auto c = std::unique_ptr<ShardedPsClient>(new ShardedPsClient(std::move(options)));
  for (const auto& address : c->options_.addresses) {
    PsClientOptions o = c->options_.client;
    o.address = address;
    HERD_ASSIGN_OR_RETURN(auto client, PsClient::Connect(o));
    c->clients_.push_back(std::move(client));
  }
  for (const auto& chunk : c->options_.chunks) {
    c->index_[chunk.key] = &chunk;
    if (chunk.server < 0 || chunk.server >= static_cast<int>(c->clients_.size())) {
      return absl::InvalidArgumentError(
          absl::StrFormat("the shard map puts key %s on shard %d, but there are %d shard addresses",
                          KeyName(chunk.key), chunk.server, c->clients_.size()));
    }
  }
  return c;
}

absl::StatusOr<const ChunkPlacement*> ShardedPsClient::Find(int shard, const PullChunk& p) const {
  auto it = index_.find(KeyId{p.tensor(), p.chunk()});
  if (it == index_.end() || it->second->server != shard) {
    return absl::DataLossError(absl::StrFormat("shard %d answered key %s, which is not its own",
                                               shard, KeyName(KeyId{p.tensor(), p.chunk()})));
  }
  return it->second;
}

absl::Status ShardedPsClient::ForEachShard(const std::function<absl::Status(int)>& fn) {
  std::vector<absl::Status> results(clients_.size());
  std::vector<std::thread> threads;
  for (size_t s = 0; s < clients_.size(); ++s) {
    threads.emplace_back([&, s] { results[s] = fn(static_cast<int>(s)); });
  }
  for (auto& t : threads) t.join();
  for (const auto& st : results) HERD_RETURN_IF_ERROR(st);
  return absl::OkStatus();
}

absl::Status ShardedPsClient::Init(const std::vector<std::vector<float>>& tensors) {
  return ForEachShard([&](int s) -> absl::Status {
    std::vector<herd::v1::InitKeyChunk> chunks;
    for (const auto& c : options_.chunks) {
      if (c.server != s) continue;
      herd::v1::InitKeyChunk k;
      k.set_job(options_.job);
      k.set_worker(options_.worker);
      k.set_tensor(c.key.tensor);
      k.set_chunk(c.key.chunk);
      k.set_dtype("fp32");
      k.set_values(BytesOf(tensors[c.key.tensor].data() + c.offset, c.count));
      chunks.push_back(std::move(k));
    }
    // Idempotent (the first value wins), so a shard still starting or restarting is retried.
    return WhileUnavailable(s, [&] { return clients_[s]->InitKeys(chunks).status(); });
  });
}

absl::Status ShardedPsClient::WhileUnavailable(int shard,
                                               const std::function<absl::Status()>& call) {
  absl::Status st = call();
  if (!absl::IsUnavailable(st)) return st;
  // A shard answers UNAVAILABLE while it starts (it has not been given its keys yet), while it
  // restarts, and from its old address after a restart on a new port.
  const Deadline deadline = Deadline::After(options_.retry_for);
  auto next_resolve = std::chrono::steady_clock::now();
  while (absl::IsUnavailable(st) && !deadline.expired()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (std::chrono::steady_clock::now() >= next_resolve) {
      Reresolve(shard);
      next_resolve = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    }
    st = call();
  }
  return st;
}

absl::Status ShardedPsClient::RoundOnShard(int shard, int64_t round,
                                           const std::vector<PushChunk>& all,
                                           std::vector<PullChunk>* out) {
  auto pushed = clients_[shard]->PushPull(all);
  if (pushed.ok() || !absl::IsUnavailable(pushed.status())) {
    if (pushed.ok()) *out = std::move(*pushed);
    return pushed.status();
  }
  // The shard went away (or the connection did). Some of these pushes may have been applied
  // (and, under every-round, written) without an answer; others were lost with the shard.
  return WhileUnavailable(shard, [&] { return ResumeOnShard(shard, round, all, out); });
}

void ShardedPsClient::Reresolve(int shard) {
  if (!options_.resolve_address) return;
  absl::StatusOr<std::string> address = options_.resolve_address(shard);
  if (!address.ok() || address->empty() || *address == options_.addresses[shard]) return;
  PsClientOptions o = options_.client;
  o.address = *address;
  auto client = PsClient::Connect(o);
  if (!client.ok()) return;  // retried at the next look
  Log().info("ps client: shard {} moved from {} to {} (the plan says so); reconnecting", shard,
             options_.addresses[shard], *address);
  options_.addresses[shard] = *address;
  clients_[shard] = std::move(*client);
}

absl::Status ShardedPsClient::ResumeOnShard(int shard, int64_t round,
                                            const std::vector<PushChunk>& all,
                                            std::vector<PullChunk>* out) {
  PsClient& c = *clients_[shard];
  auto pull_one = [&](const PushChunk& chunk, int64_t min_version) -> absl::Status {
    herd::v1::PullRequest req;
    req.set_job(options_.job);
    req.set_worker(options_.worker);
    req.set_min_version(min_version);
    auto* k = req.add_keys();
    k->set_tensor(chunk.tensor());
    k->set_chunk(chunk.chunk());
    HERD_ASSIGN_OR_RETURN(auto got, c.Pull(req));
    for (auto& p : got) out->push_back(std::move(p));
    return absl::OkStatus();
  };
  out->clear();
  // ps_sync / ps_ec: a key whose version passed `round` finished the round; its push is not
  // sent again. ps_async versions count every worker's pushes and say nothing about ours.
  std::set<KeyId> completed;
  if (!options_.async) {
    herd::v1::PullRequest req;
    req.set_job(options_.job);
    req.set_worker(options_.worker);
    for (const auto& chunk : all) {
      auto* k = req.add_keys();
      k->set_tensor(chunk.tensor());
      k->set_chunk(chunk.chunk());
    }
    HERD_ASSIGN_OR_RETURN(auto current, c.Pull(req));
    for (auto& p : current) {
      if (p.version() > round) {
        completed.insert(KeyId{p.tensor(), p.chunk()});
        out->push_back(std::move(p));
      }
    }
  }
  // The others one by one, so that a push the shard already holds (ALREADY_EXISTS: it did not
  // go away after all, or it applied our ps_async clock) does not stop the rest.
  const int64_t after = options_.async ? 0 : round + 1;
  for (const auto& chunk : all) {
    if (completed.count(KeyId{chunk.tensor(), chunk.chunk()})) continue;
    auto got = c.PushPull({chunk});
    if (got.ok()) {
      for (auto& p : *got) out->push_back(std::move(p));
    } else if (absl::IsAlreadyExists(got.status())) {
      HERD_RETURN_IF_ERROR(pull_one(chunk, after));
    } else {
      return got.status();
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ShardedPsClient::PushPull(int64_t round,
                                                  const std::vector<std::vector<float>>& grads,
                                                  std::vector<std::vector<float>>* params) {
  params->resize(grads.size());
  for (size_t t = 0; t < grads.size(); ++t) (*params)[t].resize(grads[t].size());
  auto per_shard = MakePushes(round, grads, nullptr);
  std::vector<int64_t> min_version(clients_.size(), INT64_MAX);
  HERD_RETURN_IF_ERROR(ForEachShard([&](int s) -> absl::Status {
    std::vector<PullChunk> pulled;
    HERD_RETURN_IF_ERROR(RoundOnShard(s, round, per_shard[s], &pulled));
    for (const auto& p : pulled) {
      HERD_RETURN_IF_ERROR(CopyPulled(s, p, params));
      min_version[s] = std::min(min_version[s], p.version());
    }
    return absl::OkStatus();
  }));
  return *std::min_element(min_version.begin(), min_version.end());
}

absl::Status ShardedPsClient::CopyPulled(int shard, const PullChunk& p,
                                         std::vector<std::vector<float>>* params) const {
  HERD_ASSIGN_OR_RETURN(const ChunkPlacement* c, Find(shard, p));
  auto& t = (*params)[c->key.tensor];
  if (t.size() < static_cast<size_t>(c->offset + c->count)) t.resize(c->offset + c->count);
  if (p.data().size() != static_cast<size_t>(c->count) * 4) {
    return absl::DataLossError(absl::StrFormat("shard %d answered %d bytes for key %s", shard,
                                               p.data().size(), KeyName(c->key)));
  }
  std::memcpy(t.data() + c->offset, p.data().data(), p.data().size());
  return absl::OkStatus();
}

std::vector<std::vector<PushChunk>> ShardedPsClient::MakePushes(
    int64_t round, const std::vector<std::vector<float>>& grads,
    const compression::Compressor* compressor) {
  std::vector<std::vector<PushChunk>> per_shard(clients_.size());
  std::vector<float> scratch;
  for (const auto& c : options_.chunks) {
    PushChunk p;
    p.set_job(options_.job);
    p.set_worker(options_.worker);
    p.set_tensor(c.key.tensor);
    p.set_chunk(c.key.chunk);
    p.set_round(round);
    p.set_dtype("fp32");
    if (compressor == nullptr) p.set_learning_rate(learning_rate_);
    for (int j : joiners_) p.add_joiners(j);
    if (iteration_ >= 0) p.set_iteration(iteration_);
    const float* data = grads[c.key.tensor].data() + c.offset;
    if (compressor == nullptr) {
      p.set_data(BytesOf(data, c.count));
    } else {
      // The residuals are this worker's state: compress on this thread.
      auto& delta = delta_[c.key];
      delta.resize(c.count, 0.0f);
      compression::CompressWithFeedback(*compressor, std::span<const float>(data, c.count), delta,
                                        p.mutable_data(), &scratch);
    }
    per_shard[c.server].push_back(std::move(p));
  }
  return per_shard;
}

absl::Status ShardedPsClient::Push(int64_t round, const std::vector<std::vector<float>>& grads,
                                   const compression::Compressor* compressor) {
  auto per_shard = MakePushes(round, grads, compressor);
  return ForEachShard(
      [&](int s) -> absl::Status { return clients_[s]->Push(per_shard[s]).status(); });
}

absl::StatusOr<int64_t> ShardedPsClient::PushPullCompressed(
    compression::Compressor compressor, int64_t round, const std::vector<std::vector<float>>& grads,
    std::vector<std::vector<float>>* sums) {
  sums->resize(grads.size());
  for (size_t t = 0; t < grads.size(); ++t) (*sums)[t].resize(grads[t].size());
  auto per_shard = MakePushes(round, grads, &compressor);
  std::vector<int64_t> min_version(clients_.size(), INT64_MAX);
  HERD_RETURN_IF_ERROR(ForEachShard([&](int s) -> absl::Status {
    std::vector<PullChunk> pulled;
    HERD_RETURN_IF_ERROR(RoundOnShard(s, round, per_shard[s], &pulled));
    for (const auto& p : pulled) {
      HERD_ASSIGN_OR_RETURN(const ChunkPlacement* c, Find(s, p));
      HERD_RETURN_IF_ERROR(compression::Decompress(
          compressor, p.data(),
          std::span<float>((*sums)[c->key.tensor].data() + c->offset, c->count)));
      min_version[s] = std::min(min_version[s], p.version());
    }
    return absl::OkStatus();
  }));
  return *std::min_element(min_version.begin(), min_version.end());
}

absl::StatusOr<int64_t> ShardedPsClient::Pull(int64_t min_version,
                                              std::vector<std::vector<float>>* params) {
  int tensors = 0;
  for (const auto& c : options_.chunks) tensors = std::max(tensors, c.key.tensor + 1);
  if (static_cast<int>(params->size()) < tensors) params->resize(tensors);
  std::vector<int64_t> versions(clients_.size(), INT64_MAX);
  HERD_RETURN_IF_ERROR(ForEachShard([&](int s) -> absl::Status {
    herd::v1::PullRequest req;
    req.set_job(options_.job);
    req.set_worker(options_.worker);
    req.set_min_version(min_version);
    std::vector<PullChunk> pulled;
    HERD_RETURN_IF_ERROR(WhileUnavailable(s, [&]() -> absl::Status {
      HERD_ASSIGN_OR_RETURN(pulled, clients_[s]->Pull(req));
      return absl::OkStatus();
    }));
    for (const auto& p : pulled) {
      HERD_RETURN_IF_ERROR(CopyPulled(s, p, params));
      versions[s] = std::min(versions[s], p.version());
    }
    return absl::OkStatus();
  }));
  return *std::min_element(versions.begin(), versions.end());
}

}  // namespace herd::server
