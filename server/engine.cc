#include "server/engine.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status.h"
#include "metrics/shard_metrics.h"
#include "server/engines.h"

namespace herd::server {

std::unique_ptr<Engine> Engine::Create(ShardConfig config, KeyWriter* writer) {
  switch (config.mode) {
    case Mode::kSync:
      return std::make_unique<SyncEngine>(std::move(config), writer);
    case Mode::kAsync:
      return std::make_unique<AsyncEngine>(std::move(config), writer);
    case Mode::kEc:
      return std::make_unique<EcEngine>(std::move(config), writer);
  }
  return nullptr;
}

Engine::Engine(ShardConfig config, KeyWriter* writer)
    : config_(std::move(config)),
      writer_(writer),
      live_(config_.workers, true),
      returns_(config_.workers, 0),
      node_of_(config_.workers, 0),
      waited_out_at_(config_.workers, -1),
      announced_logged_(config_.workers, 0),
      rounds_metric_(metrics::ShardMetrics::Get().Rounds(ModeName(config_.mode))) {
  const int slots = OptimizerSlots(config_.optimizer.kind);
  for (const auto& [key, placement] : config_.keys) {
    if (placement.server != config_.shard) continue;
    auto ks = std::make_unique<KeyState>();
    const size_t n = static_cast<size_t>(placement.count);
    ks->count = placement.count;
    ks->params.assign(n, 0.0f);
    if (slots >= 1) ks->slot0.assign(n, 0.0f);
    if (slots >= 2) ks->slot1.assign(n, 0.0f);
    if (config_.mode != Mode::kAsync) {
      ks->accum.assign(n, 0.0f);
      ks->pushed.assign(config_.workers, false);
      ks->held.resize(config_.workers);
      ks->counted_after_return.assign(config_.workers, 0);
    }
    if (config_.mode == Mode::kEc) {
      ks->epsilon.assign(n, 0.0f);
    } else if (config_.mode == Mode::kAsync) {
      ks->clocks.assign(config_.workers, 0);
      ks->clock_base.assign(config_.workers, 0);
      ks->based_on_return.assign(config_.workers, 0);
      ks->iteration_offset.assign(config_.workers, KeyState::kNoOffset);
    }
    keys_.emplace(key, std::move(ks));
  }
}

void Engine::TakeInRankOrderLocked(KeyState& ks, int w, std::span<const float> grad) {
  if (w != ks.folded) {
    ks.held[w].assign(grad.begin(), grad.end());
    return;
  }
  for (size_t i = 0; i < grad.size(); ++i) ks.accum[i] += grad[i];
  ++ks.folded;
  // Ranks that pushed before their turn, now next; a rank that has not pushed stops it.
  while (ks.folded < config_.workers && !ks.held[ks.folded].empty()) {
    const std::vector<float>& g = ks.held[ks.folded];
    for (size_t i = 0; i < g.size(); ++i) ks.accum[i] += g[i];
    std::vector<float>().swap(ks.held[ks.folded]);
    ++ks.folded;
  }
}

std::vector<float> Engine::SumInRankOrderLocked(const KeyState& ks, int last_worker,
                                                std::span<const float> last) const {
  std::vector<float> sum(ks.accum);
  for (int r = ks.folded; r < config_.workers; ++r) {
    const std::span<const float> g = r == last_worker ? last : std::span<const float>(ks.held[r]);
    for (size_t i = 0; i < g.size(); ++i) sum[i] += g[i];
  }
  return sum;
}

void Engine::ClearRoundLocked(KeyState& ks) {
  std::fill(ks.accum.begin(), ks.accum.end(), 0.0f);
  std::fill(ks.pushed.begin(), ks.pushed.end(), false);
  ks.pushed_count = 0;
  ks.folded = 0;
  for (auto& h : ks.held) std::vector<float>().swap(h);
}

absl::Status Engine::Usable() const {
  if (shutdown_.load()) {
    return absl::UnavailableError("the parameter-server shard is shutting down");
  }
  return absl::OkStatus();
}

absl::Status Engine::Writable() const {
  if (writer_ == nullptr || config_.durability.kind == Durability::Kind::kCheckpointOnly) {
    return absl::OkStatus();
  }
  return writer_->Writable();
}

absl::StatusOr<Engine::KeyState*> Engine::Lookup(std::string_view job, KeyId key) const {
  HERD_RETURN_IF_ERROR(Usable());
  if (job != config_.job) {
    return absl::NotFoundError(
        absl::StrFormat("job '%s' is not served by this shard (shard %d serves job '%s')",
                        std::string(job), config_.shard, config_.job));
  }
  auto it = keys_.find(key);
  if (it != keys_.end()) return it->second.get();
  auto placed = config_.keys.find(key);
  if (placed == config_.keys.end()) {
    return absl::NotFoundError(absl::StrFormat("job '%s' has no key %s (see the plan's shard map)",
                                               config_.job, KeyName(key)));
  }
  return absl::NotFoundError(absl::StrFormat("key %s of job '%s' is on shard %d, not on shard %d",
                                             KeyName(key), config_.job, placed->second.server,
                                             config_.shard));
}

absl::Status Engine::CheckWorker(int worker) const {
  if (worker < 0 || worker >= config_.workers) {
    return absl::NotFoundError(absl::StrFormat("worker rank %d is not in job '%s' (ranks 0..%d)",
                                               worker, config_.job, config_.workers - 1));
  }
  return absl::OkStatus();
}

bool Engine::LiveWorker(int rank) const {
  std::lock_guard<std::mutex> lock(live_mu_);
  return rank >= 0 && rank < static_cast<int>(live_.size()) && live_[rank];
}

int64_t Engine::ReturnsOf(int rank) const {
  std::lock_guard<std::mutex> lock(live_mu_);
  return rank >= 0 && rank < static_cast<int>(returns_.size()) ? returns_[rank] : 0;
}

absl::StatusOr<bool> Engine::Init(std::string_view job, KeyId key, std::string_view values) {
  auto ks_or = Lookup(job, key);
  if (!ks_or.ok()) {
    Reject();
    return ks_or.status();
  }
  KeyState& ks = **ks_or;
  HERD_RETURN_IF_ERROR(Writable());
  std::lock_guard<std::mutex> lock(ks.mu);
  if (values.size() != static_cast<size_t>(ks.count) * sizeof(float)) {
    Reject();
    return absl::InvalidArgumentError(
        absl::StrFormat("initial value of %d bytes for key %s, which holds %d fp32 values "
                        "(want %d bytes)",
                        values.size(), KeyName(key), ks.count, ks.count * 4));
  }
  if (int64_t at = FirstNonFinite(values); at >= 0) {
    Reject();
    return absl::InvalidArgumentError(absl::StrFormat(
        "initial value of key %s has a non-finite value at index %d", KeyName(key), at));
  }
  if (ks.initialized) return false;
  // An initial value is acknowledged state too; it is written like a round, before it is
  // taken (a failed write leaves the key without a value).
  if (writer_ != nullptr && config_.durability.kind != Durability::Kind::kCheckpointOnly) {
    const std::span<const float> initial(reinterpret_cast<const float*>(values.data()),
                                         static_cast<size_t>(ks.count));
    HERD_RETURN_IF_ERROR(
        WriteView(ks, KeyRecordView{key, ks.version, initial, ks.slot0, ks.slot1, ks.epsilon,
                                    ks.result, ks.clocks, ks.clock_base}));
    ks.params_durable = true;
  }
  std::memcpy(ks.params.data(), values.data(), values.size());
  ks.initialized = true;
  ks.cv.notify_all();
  return true;
}

absl::Status Engine::Restore(const KeyRecord& r) {
  auto it = keys_.find(r.key);
  if (it == keys_.end()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the state directory holds key %s of job '%s', which the plan does not put on shard %d "
        "(was the directory used by another shard?)",
        KeyName(r.key), config_.job, config_.shard));
  }
  KeyState& ks = *it->second;
  std::lock_guard<std::mutex> lock(ks.mu);
  auto same = [&](size_t got, size_t want, const char* what) -> absl::Status {
    if (got == want) return absl::OkStatus();
    return absl::DataLossError(absl::StrFormat(
        "stored %s of key %s has %d values, the job's key has %d (different job spec?)", what,
        KeyName(r.key), got, want));
  };
  HERD_RETURN_IF_ERROR(same(r.params.size(), ks.params.size(), "parameters"));
  HERD_RETURN_IF_ERROR(same(r.slot0.size(), ks.slot0.size(), "optimizer state"));
  HERD_RETURN_IF_ERROR(same(r.slot1.size(), ks.slot1.size(), "optimizer state"));
  HERD_RETURN_IF_ERROR(same(r.epsilon.size(), ks.epsilon.size(), "residual"));
  HERD_RETURN_IF_ERROR(same(r.clocks.size(), ks.clocks.size(), "worker clocks"));
  if (!r.clock_bases.empty()) {
    HERD_RETURN_IF_ERROR(same(r.clock_bases.size(), ks.clock_base.size(), "worker clock bases"));
  }
  // A shard never serves a non-finite parameter, not even one an older shard wrote.
  for (const auto* part : {&r.params, &r.slot0, &r.slot1, &r.epsilon}) {
    const std::string_view bytes(reinterpret_cast<const char*>(part->data()),
                                 part->size() * sizeof(float));
    if (int64_t at = FirstNonFinite(bytes); at >= 0) {
      return absl::DataLossError(
          absl::StrFormat("stored state of key %s of job '%s' holds a non-finite value at index %d",
                          KeyName(r.key), config_.job, at));
    }
  }
  ks.params = r.params;
  ks.slot0 = r.slot0;
  ks.slot1 = r.slot1;
  ks.epsilon = r.epsilon;
  ks.result = r.result;
  ks.clocks = r.clocks;
  // A worker back in its slot before the restart goes on counting from its new executor's 0.
  if (!r.clock_bases.empty()) ks.clock_base = r.clock_bases;
  ks.version = r.version;
  ks.initialized = true;
  ks.params_durable = true;
  ks.durable_version = r.version;
  return absl::OkStatus();
}

absl::Status Engine::Push(const PushArgs& args, Deadline deadline) {
  auto fail = [&](absl::Status st) {
    Reject();
    return st;
  };
  auto ks_or = Lookup(args.job, args.key);
  if (!ks_or.ok()) return fail(ks_or.status());
  if (auto st = CheckWorker(args.worker); !st.ok()) return fail(st);
  // While the state cannot be written no push is taken: it could not be acknowledged.
  HERD_RETURN_IF_ERROR(Writable());
  if (!args.dtype.empty() && args.dtype != "fp32" && args.dtype != "float32") {
    return fail(absl::InvalidArgumentError(
        absl::StrFormat("push of dtype %s for key %s: this shard takes fp32 gradients",
                        std::string(args.dtype), KeyName(args.key))));
  }
  // The same bound as a job's learning rate (scheduler/limits.h); 0 means the job's.
  if (args.learning_rate != 0 && !(args.learning_rate > 0 && args.learning_rate <= 1e6)) {
    return fail(absl::InvalidArgumentError(
        absl::StrFormat("push from worker %d for key %s has learning rate %g: it must be finite, "
                        "> 0 and <= 1e6 (or 0 for the job's)",
                        args.worker, KeyName(args.key), args.learning_rate)));
  }
  KeyState& ks = **ks_or;
  std::unique_lock<std::mutex> lock(ks.mu);
  if (!ks.initialized) {
    return fail(absl::FailedPreconditionError(
        absl::StrFormat("key %s of job '%s' has no value yet: call InitKeys first",
                        KeyName(args.key), config_.job)));
  }
  if (auto st = PushLocked(ks, args, lock, deadline); !st.ok()) {
    if (!absl::IsUnavailable(st)) Reject();
    return st;
  }
  pushes_.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status Engine::WaitRound(KeyId key, int64_t round, Deadline deadline) {
  auto ks_or = Lookup(config_.job, key);
  if (!ks_or.ok()) return ks_or.status();
  KeyState& ks = **ks_or;
  std::unique_lock<std::mutex> lock(ks.mu);
  while (ks.version <= round) {
    HERD_RETURN_IF_ERROR(Usable());
    if (ks.refused_round == round) return ks.refused;
    // A round cannot complete while its write would fail: say why instead of timing out.
    HERD_RETURN_IF_ERROR(Writable());
    if (ks.cv.wait_until(lock, deadline.at()) == std::cv_status::timeout && ks.version <= round) {
      return absl::DeadlineExceededError(
          absl::StrFormat("round %d of key %s did not complete in time: %d of %d workers pushed it",
                          round, KeyName(key), ks.pushed_count, config_.workers));
    }
  }
  return Usable();
}

std::string Engine::PullPayloadLocked(const KeyState& ks) const {
  return std::string(reinterpret_cast<const char*>(ks.params.data()),
                     ks.params.size() * sizeof(float));
}

absl::StatusOr<Pulled> Engine::Pull(std::string_view job, int worker, KeyId key,
                                    int64_t min_version, Deadline deadline) {
  auto ks_or = Lookup(job, key);
  if (!ks_or.ok()) {
    Reject();
    return ks_or.status();
  }
  if (auto st = CheckWorker(worker); !st.ok()) {
    Reject();
    return st;
  }
  KeyState& ks = **ks_or;
  std::unique_lock<std::mutex> lock(ks.mu);
  while (!ks.initialized || ks.version < min_version) {
    HERD_RETURN_IF_ERROR(Usable());
    // The round this pull waits for was refused (non-finite): it will not come by itself.
    if (ks.initialized && ks.refused_round == ks.version) return ks.refused;
    if (ks.cv.wait_until(lock, deadline.at()) == std::cv_status::timeout &&
        (!ks.initialized || ks.version < min_version)) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "key %s did not reach version %d in time (it is at %d%s; %d of %d workers pushed "
          "the current round)",
          KeyName(key), min_version, ks.version, ks.initialized ? "" : ", not initialised",
          ks.pushed_count, config_.workers));
    }
  }
  HERD_RETURN_IF_ERROR(Usable());
  // ps_ec before its first round: version 0 and no payload (there is no sum yet).
  Pulled out{ks.version, PullPayloadLocked(ks)};
  pulls_.fetch_add(1, std::memory_order_relaxed);
  return out;
}

absl::Status Engine::CommitRoundLocked(KeyState& ks, KeyId key, NextState next,
                                       std::string_view who) {
  // Finite first: a NaN or infinity, once applied, would be written and served for good.
  const std::pair<const char*, const std::optional<std::vector<float>>*> parts[] = {
      {"parameter", &next.params},
      {"optimizer state", &next.slot0},
      {"optimizer state", &next.slot1},
      {"server residual", &next.epsilon}};
  for (const auto& [what, part] : parts) {
    if (!part->has_value()) continue;
    const auto& v = **part;
    const std::string_view bytes(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
    if (int64_t at = FirstNonFinite(bytes); at >= 0) {
      const std::string how = config_.mode == Mode::kEc
                                  ? std::string("the sum of")
                                  : absl::StrFormat("optimizer %s (learning rate %g) to",
                                                    optim::OptimizerName(config_.optimizer.kind),
                                                    config_.optimizer.learning_rate);
      return absl::InvalidArgumentError(absl::StrFormat(
          "round %d of key %s refused: applying %s %s gives a non-finite %s at index %d; the key "
          "stays at version %d",
          ks.version, KeyName(key), how, std::string(who), what, at, ks.version));
    }
  }
  const auto& d = config_.durability;
  if (d.kind == Durability::Kind::kEveryRound ||
      (d.kind == Durability::Kind::kEveryK && ks.rounds_since_write + 1 >= d.k)) {
    KeyRecordView view{key,
                       ks.version + 1,
                       next.params ? *next.params : ks.params,
                       next.slot0 ? *next.slot0 : ks.slot0,
                       next.slot1 ? *next.slot1 : ks.slot1,
                       next.epsilon ? *next.epsilon : ks.epsilon,
                       next.result ? *next.result : ks.result,
                       next.clocks ? *next.clocks : ks.clocks,
                       ks.clock_base};
    if (config_.mode == Mode::kEc && ks.params_durable && !next.params) view.params = {};
    HERD_RETURN_IF_ERROR(WriteView(ks, view));
    ks.rounds_since_write = 0;
    ks.params_durable = true;
  } else {
    ++ks.rounds_since_write;
  }
  if (next.params) ks.params = std::move(*next.params);
  if (next.slot0) ks.slot0 = std::move(*next.slot0);
  if (next.slot1) ks.slot1 = std::move(*next.slot1);
  if (next.epsilon) ks.epsilon = std::move(*next.epsilon);
  if (next.result) ks.result = std::move(*next.result);
  if (next.clocks) ks.clocks = std::move(*next.clocks);
  ++ks.version;
  ks.refused_round = -1;
  if (ks.version == capture_version_.load()) CaptureLocked(ks, key);
  rounds_.fetch_add(1, std::memory_order_relaxed);
  rounds_metric_.Increment();
  ks.cv.notify_all();
  return absl::OkStatus();
}

absl::Status Engine::WriteLocked(KeyState& ks, KeyId key) {
  KeyRecordView view{key,        ks.version, ks.params, ks.slot0,     ks.slot1,
                     ks.epsilon, ks.result,  ks.clocks, ks.clock_base};
  if (config_.mode == Mode::kEc && ks.params_durable) view.params = {};
  HERD_RETURN_IF_ERROR(WriteView(ks, view));
  ks.rounds_since_write = 0;
  ks.params_durable = true;
  return absl::OkStatus();
}

absl::Status Engine::WriteView(KeyState& ks, KeyRecordView view) {
  if (writer_ == nullptr) return absl::OkStatus();
  // The store's error is UNAVAILABLE naming the cause (storage/database.h); the shard goes on
  // serving and takes writes again once the disk is back.
  HERD_RETURN_IF_ERROR(writer_->Write(config_.job, view));
  ks.durable_version = view.version;
  writes_.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

std::optional<int64_t> Engine::DurableVersion() const {
  if (writer_ == nullptr || keys_.empty()) return std::nullopt;
  int64_t lowest = INT64_MAX;
  for (const auto& [key, ks] : keys_) {
    std::lock_guard<std::mutex> lock(ks->mu);
    if (ks->durable_version < 0) return std::nullopt;
    lowest = std::min(lowest, ks->durable_version);
  }
  return lowest;
}

std::vector<KeyId> Engine::Keys() const {
  std::vector<KeyId> out;
  out.reserve(keys_.size());
  for (const auto& [key, ks] : keys_) out.push_back(key);
  return out;
}

void Engine::SetLiveWorkers(const std::vector<int>& ranks, const std::vector<uint64_t>& nodes) {
  {
    std::lock_guard<std::mutex> lock(live_mu_);
    const std::vector<bool> before = live_;
    std::fill(live_.begin(), live_.end(), false);
    for (size_t i = 0; i < ranks.size(); ++i) {
      const int r = ranks[i];
      if (r < 0 || r >= static_cast<int>(live_.size())) continue;
      live_[r] = true;
      // Another process in the slot is a return even when no plan in between named the slot
      // dead (this shard's watch may see only the later of two plans close together).
      const uint64_t node = i < nodes.size() ? nodes[i] : 0;
      if (node != 0 && node_of_[r] != 0 && node != node_of_[r] && before[r]) ++returns_[r];
      if (node != 0) node_of_[r] = node;
    }
    for (size_t r = 0; r < live_.size(); ++r) returns_[r] += live_[r] && !before[r] ? 1 : 0;
    ++live_changes_;
  }
  for (auto& [key, ks] : keys_) {
    std::lock_guard<std::mutex> lock(ks->mu);
    OnLiveWorkersLocked(*ks, key);
  }
}

void Engine::OnLiveWorkersLocked(KeyState& ks, KeyId key) {
  if (config_.elastic && config_.mode != Mode::kAsync && ks.initialized && ks.pushed_count > 0 &&
      RoundCompleteWith(ks, -1)) {
    (void)CompleteOpenRoundLocked(ks, key);
  }
  ks.cv.notify_all();
}

bool Engine::RoundCompleteWith(const KeyState& ks, int worker) const {
  for (int w = 0; w < config_.workers; ++w) {
    if (ks.pushed[w] || w == worker) continue;
    if (config_.elastic && (!LiveWorker(w) || !CountedLocked(ks, w))) continue;
    return false;
  }
  return ks.pushed_count > 0 || worker >= 0;
}

bool Engine::CountedLocked(const KeyState& ks, int w) const {
  if (config_.mode == Mode::kAsync || !config_.elastic) return true;
  return ks.counted_after_return[w] == ReturnsOf(w);
}

void Engine::AwaitPlanNamingLiveLocked(KeyState& ks, const PushArgs& args,
                                       std::unique_lock<std::mutex>& lock, Deadline deadline) {
  if (!config_.elastic) return;
  auto all_live = [&] {
    if (!LiveWorker(args.worker)) return false;
    for (int j : args.joiners) {
      if (j >= 0 && j < config_.workers && !LiveWorker(j)) return false;
    }
    return true;
  };
  if (all_live()) return;
  // One wait per plan: once a wait ran out, the worker's pushes of its other keys are refused
  // at once until the live workers change (a dead worker's stream of many keys is not held
  // key after key).
  auto waited_out = [&] {
    std::lock_guard<std::mutex> live(live_mu_);
    return waited_out_at_[args.worker] == live_changes_;
  };
  if (waited_out()) return;
  const auto until = std::min(deadline.at(), std::chrono::steady_clock::now() + config_.plan_wait);
  while (!all_live() && Usable().ok()) {
    if (ks.cv.wait_until(lock, until) == std::cv_status::timeout) {
      if (!all_live()) {
        std::lock_guard<std::mutex> live(live_mu_);
        waited_out_at_[args.worker] = live_changes_;
      }
      return;
    }
  }
}

absl::Status Engine::CheckReturnedPushLocked(const KeyState& ks, const PushArgs& args) const {
  if (!config_.elastic || !LiveWorker(args.worker) || CountedLocked(ks, args.worker) ||
      args.round >= ks.version) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "worker %d is back in job '%s' but key %s completed round %d without it (the key is at "
      "version %d, and no push announced the worker yet): its model would miss that round's "
      "update; a worker back in its slot starts at the round its source announces it in",
      args.worker, config_.job, KeyName(args.key), args.round, ks.version));
}

void Engine::CountReturnedLocked(KeyState& ks, const PushArgs& args) {
  if (config_.mode == Mode::kAsync || !config_.elastic) return;
  // Counted from this round on; logged once per return (at its first key).
  auto count = [&](int w, std::string_view how) {
    const int64_t returns = ReturnsOf(w);
    if (ks.counted_after_return[w] == returns) return;
    ks.counted_after_return[w] = returns;
    bool first = false;
    {
      std::lock_guard<std::mutex> lock(live_mu_);
      first = std::exchange(announced_logged_[w], returns) != returns;
    }
    if (first) {
      Log().info(
          "server: worker {} is back in job '{}': key {} counts it from round {} on ({}); "
          "each key's rounds before its first such push completed without it",
          w, config_.job, KeyName(args.key), args.round, how);
    }
  };
  if (LiveWorker(args.worker)) count(args.worker, "its own first push of the open round");
  for (int j : args.joiners) {
    if (j < 0 || j >= config_.workers || j == args.worker) continue;
    if (!LiveWorker(j)) {
      Log().warn(
          "server: worker {} announces worker {} to key {} of job '{}' from round {}, but the "
          "plans this shard heard name it dead; not counted",
          args.worker, j, KeyName(args.key), config_.job, args.round);
      continue;
    }
    count(j, absl::StrFormat("announced by worker %d, its source", args.worker));
  }
}

absl::Status Engine::CheckRoundPushLocked(KeyState& ks, const PushArgs& args) {
  if (config_.elastic && !LiveWorker(args.worker)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "worker %d is not a live worker of job '%s' (the scheduler declared it dead); its push "
        "for key %s was not applied",
        args.worker, config_.job, KeyName(args.key)));
  }
  absl::Status st = CheckRound(config_, ks.version, ks.pushed, args);
  if (absl::IsAlreadyExists(st) && config_.elastic && RoundCompleteWith(ks, -1)) {
    (void)CompleteOpenRoundLocked(ks, args.key);
  }
  return st;
}

absl::StatusOr<int> Engine::WriteAll() {
  // Not Usable(): the final write of a clean stop runs after Shutdown(), once no call can
  // change the state any more.
  int n = 0;
  for (auto& [key, ks] : keys_) {
    std::lock_guard<std::mutex> lock(ks->mu);
    if (!ks->initialized) continue;
    HERD_RETURN_IF_ERROR(WriteLocked(*ks, key));
    ++n;
  }
  return n;
}

void Engine::Shutdown() {
  shutdown_.store(true);
  {
    std::lock_guard<std::mutex> lock(capture_mu_);
    capture_cv_.notify_all();
  }
  for (auto& [key, ks] : keys_) {
    std::lock_guard<std::mutex> lock(ks->mu);
    ks->cv.notify_all();
  }
}

EngineStats Engine::Stats() const {
  EngineStats s;
  s.keys = static_cast<int>(keys_.size());
  bool first = true;
  for (const auto& [key, ks] : keys_) {
    std::lock_guard<std::mutex> lock(ks->mu);
    s.parameter_bytes += ks->count * static_cast<int64_t>(sizeof(float));
    if (ks->initialized) ++s.keys_initialized;
    s.min_version = first ? ks->version : std::min(s.min_version, ks->version);
    s.max_version = std::max(s.max_version, ks->version);
    first = false;
  }
  s.pushes = pushes_.load();
  s.pulls = pulls_.load();
  s.rejected = rejected_.load();
  s.rounds_completed = rounds_.load();
  s.durable_writes = writes_.load();
  return s;
}

}  // namespace herd::server
