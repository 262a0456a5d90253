#include "worker/executors/ps_executor.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "algorithms/compression/compressor.h"
#include "common/status.h"
#include "metrics/worker_metrics.h"
#include "plan/modes.h"
#include "server/client/sharded_client.h"
#include "worker/executor_state.h"
#include "worker/executors/wait_timer.h"
#include "worker/local_optimizer.h"

namespace herd::worker {
namespace {

enum class PsMode { kSync, kAsync, kEc };

// How this worker talks to the shards of `mode`: the shards' engine, from the registry.
absl::StatusOr<PsMode> PsModeOf(const plan::ModeInfo& mode) {
  switch (mode.server_engine) {
    case plan::ServerEngine::kSync:
      return PsMode::kSync;
    case plan::ServerEngine::kAsync:
      return PsMode::kAsync;
    case plan::ServerEngine::kErrorCompensated:
      return PsMode::kEc;
    case plan::ServerEngine::kNone:
      break;
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "mode '%s' is not served by parameter servers; the parameter-server executor cannot run it",
      mode.name));
}

class PsExecutor final : public Executor {
 public:
  PsExecutor(const ExecutorContext& c, PsMode mode, compression::Compressor compressor,
             std::unique_ptr<server::ShardedPsClient> client)
      : context_(c),
        mode_(mode),
        compressor_(compressor),
        client_(std::move(client)),
        optimizer_(c.optimizer, c.tensors) {
    for (const ModelTensor& t : c.tensors) {
      grads_.emplace_back(t.count, 0.0f);
      answers_.emplace_back(t.count, 0.0f);
    }
  }

  // Offers the initial values and, where the shards hold the parameters, adopts theirs.
  absl::Status Start() {
    std::vector<std::vector<float>> current;
    for (const ModelTensor& t : context_.tensors) current.emplace_back(t.param, t.param + t.count);
    {
      WaitTimer timer(&exposed_seconds_, context_.timeline, "init keys");
      HERD_RETURN_IF_ERROR(client_->Init(current));
    }
    if (mode_ == PsMode::kEc) return absl::OkStatus();
    WaitTimer timer(&exposed_seconds_, context_.timeline, "pull");
    HERD_ASSIGN_OR_RETURN(int64_t version, client_->Pull(0, &answers_));
    if (mode_ == PsMode::kSync) round_ = version;
    CopyAnswersToParams();
    return absl::OkStatus();
  }

  std::string_view mode() const override { return context_.plan.mode().mode(); }
  std::string Describe() const override {
    return absl::StrFormat("%s: %d shards, round %d", mode(), client_->shards(), round_);
  }

  absl::Status BeginIteration(int64_t iteration) override {
    // ps_async: a worker back in its slot goes on at the clock of its iteration (PushChunk).
    if (mode_ == PsMode::kAsync) client_->set_iteration(iteration);
    for (auto& g : grads_) std::fill(g.begin(), g.end(), 0.0f);
    return absl::OkStatus();
  }
  absl::Status BeforeForward(int tensor) override { return absl::OkStatus(); }
  absl::Status GradientReady(int tensor, std::span<const float> grad) override {
    std::memcpy(grads_[tensor].data(), grad.data(),
                std::min(grad.size(), grads_[tensor].size()) * sizeof(float));
    return absl::OkStatus();
  }

  absl::Status EndBackward() override {
    WaitTimer timer(&exposed_seconds_, context_.timeline,
                    mode_ == PsMode::kEc ? "compress, push, pull, decompress" : "push-pull");
    if (mode_ == PsMode::kEc) {
      HERD_ASSIGN_OR_RETURN(int64_t version,
                            client_->PushPullCompressed(compressor_, round_, grads_, &answers_));
      client_->set_joiners({});  // announced with this round
      round_ = version;
      // The shards answer the sum of the M workers' gradients; the update uses their mean.
      const float scale = 1.0f / static_cast<float>(std::max(1, context_.plan.world_size()));
      for (size_t t = 0; t < answers_.size(); ++t) {
        for (float& v : answers_[t]) v *= scale;
        optimizer_.Step(static_cast<int>(t), answers_[t]);
      }
      return absl::OkStatus();
    }
    if (mode_ == PsMode::kAsync) {
      // A shard applies every push on its own: each worker sends 1/M of its gradient, so M
      // pushes move the model as far as one synchronous round of the mean gradient (with the
      // full gradient, M workers would step M times as far, and with momentum diverge).
      const float scale = 1.0f / static_cast<float>(std::max(1, context_.plan.world_size()));
      for (auto& g : grads_) {
        for (float& v : g) v *= scale;
      }
    }
    // A program that schedules its learning rate (a torch LR scheduler) steps the shards with it.
    if (context_.optimizer.learning_rate_source) {
      client_->set_learning_rate(context_.optimizer.learning_rate_source->load());
    }
    HERD_ASSIGN_OR_RETURN(int64_t version, client_->PushPull(round_, grads_, &answers_));
    client_->set_joiners({});  // ps_sync: announced with this round
    // ps_sync: the next round is the version the shards reached; ps_async: the worker's clock.
    round_ = mode_ == PsMode::kSync ? version : round_ + 1;
    CopyAnswersToParams();
    return absl::OkStatus();
  }

  absl::Status Flush() override { return absl::OkStatus(); }

  // ps_sync and ps_ec: this iteration's pushes announce the workers this one handed its state
  // to (ps_async's shards count a returned worker from the slowest clock instead).
  void AnnounceJoiners(std::vector<int> ranks) override {
    if (mode_ != PsMode::kAsync) client_->set_joiners(std::move(ranks));
  }

  // ps_sync and ps_ec: "ps/version", the shards' version this worker pushes next (a resumed
  // ps_ec worker, which never pulls first, starts there). ps_async: "ps/clock", this worker's
  // clock, for inspection only: clocks restart at 0 on import, on the shards as here
  // (server/engine.h). ps_ec also keeps the local optimizer's slots and its residual per key,
  // saved per tensor ("residual/<t>", the sender residual of every compressing mode).
  absl::Status ExportState(checkpoint::ProcessState& out) const override {
    out.values[mode_ == PsMode::kAsync ? "ps/clock" : "ps/version"] = absl::StrCat(round_);
    if (mode_ != PsMode::kEc) return absl::OkStatus();
    optimizer_.ExportState(out);
    std::vector<std::vector<float>> residuals;
    for (const ModelTensor& t : context_.tensors) residuals.emplace_back(t.count, 0.0f);
    for (const auto& e : context_.plan.shards()) {
      const std::vector<float>& r = client_->residual(server::KeyId{e.tensor(), e.chunk()});
      if (r.size() == static_cast<size_t>(e.count())) {
        std::copy(r.begin(), r.end(), residuals[e.tensor()].begin() + e.offset());
      }
    }
    ExportPlaced(out, "residual", context_.tensors, FlatPerTensor(), residuals);
    return absl::OkStatus();
  }

  absl::Status ImportState(const checkpoint::StateSource& from) override {
    if (mode_ == PsMode::kAsync) return absl::OkStatus();
    const ImportWhere where = WhereOf(context_);
    if (mode_ == PsMode::kSync) return ImportSyncRound(from, where);
    std::vector<std::vector<float>> residuals;
    for (const ModelTensor& t : context_.tensors) residuals.emplace_back(t.count, 0.0f);
    HERD_RETURN_IF_ERROR(RunAll({optimizer_.ImportState(from, Reshard::kReplicated, where),
                                 ImportPlaced(from, "residual", Reshard::kMean, where,
                                              context_.tensors, FlatPerTensor(), &residuals)}));
    for (const auto& e : context_.plan.shards()) {
      const auto& r = residuals[e.tensor()];
      client_->set_residual(
          server::KeyId{e.tensor(), e.chunk()},
          std::vector<float>(r.begin() + e.offset(), r.begin() + e.offset() + e.count()));
    }
    if (std::optional<int64_t> version = ReadIntValue(from, "ps/version", where)) round_ = *version;
    return absl::OkStatus();
  }

 private:
  // ps_sync: the imported round ("ps/version": a handed-over state, a resumed or switched
  // worker's) is the one this worker pushes next, and Start() pulled the parameters of the
  // shards' version. They agree: a joiner's source pulled its round, which cannot complete
  // without the joiner (the source's pushes of it announce the joiner), and a resumed job's
  // shards restore the version the workers saved. The shards may still be completing the round
  // before it (their version is behind: pull again, waiting for it); a shard past it completed
  // the round without this worker, whose push of it would be refused: an error naming both.
  absl::Status ImportSyncRound(const checkpoint::StateSource& from, const ImportWhere& where) {
    const std::optional<int64_t> imported = ReadIntValue(from, "ps/version", where);
    if (!imported || *imported == round_) return absl::OkStatus();
    if (*imported > round_) {
      WaitTimer timer(&exposed_seconds_, context_.timeline, "pull");
      HERD_ASSIGN_OR_RETURN(int64_t version, client_->Pull(*imported, &answers_));
      round_ = version;
      CopyAnswersToParams();
    }
    if (*imported != round_) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "worker %d of job '%s' takes round %d (its imported \"ps/version\"), but the shards "
          "are at version %d: they completed round %d without it, and its push of that round "
          "would be refused",
          context_.rank, context_.plan.job(), *imported, round_, *imported));
    }
    return absl::OkStatus();
  }

  // Tensor t in buffer t, from its start.
  std::vector<TensorPlace> FlatPerTensor() const {
    std::vector<TensorPlace> places;
    for (size_t t = 0; t < context_.tensors.size(); ++t) places.push_back({static_cast<int>(t), 0});
    return places;
  }

  void CopyAnswersToParams() {
    for (size_t t = 0; t < answers_.size(); ++t) {
      std::memcpy(context_.tensors[t].param, answers_[t].data(),
                  context_.tensors[t].count * sizeof(float));
    }
  }

  ExecutorContext context_;
  PsMode mode_;
  compression::Compressor compressor_;
  std::unique_ptr<server::ShardedPsClient> client_;
  LocalOptimizer optimizer_;
  std::vector<std::vector<float>> grads_;
  std::vector<std::vector<float>> answers_;
  int64_t round_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Executor>> MakePsExecutor(const ExecutorContext& context) {
  const herd::v1::Plan& plan = context.plan;
  const std::string& name = plan.mode().mode();
  HERD_ASSIGN_OR_RETURN(const plan::ModeInfo* info, plan::LookUpMode(name));
  HERD_ASSIGN_OR_RETURN(const PsMode mode, PsModeOf(*info));
  if (plan.servers_size() == 0 || plan.shards_size() == 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "mode %s needs parameter servers, but the plan of job '%s' lists none", name, plan.job()));
  }
  server::ShardedOptions o;
  o.job = plan.job();
  o.worker = context.rank;
  o.async = mode == PsMode::kAsync;
  o.client.token = context.ps_token;
  o.client.tls = context.ps_tls;
  o.client.tls_ca_file = context.ps_tls_ca_file;
  o.client.cancel = context.ps_cancel;
  o.client.sent_bytes = &metrics::WorkerMetrics::Get().SentBytes(
      plan.mode().mode(), metrics::WorkerMetrics::Peer::kServer);
  o.resolve_address = context.shard_address;
  o.client.call_timeout = context.timeout;
  for (const auto& m : plan.servers()) {
    if (m.address().empty()) {
      return absl::UnavailableError(absl::StrFormat(
          "shard %d of job '%s' has not registered an address", m.rank(), plan.job()));
    }
    o.addresses.push_back(m.address());
  }
  for (const auto& e : plan.shards()) {
    o.chunks.push_back({server::KeyId{e.tensor(), e.chunk()}, e.offset(), e.count(), e.server()});
  }
  compression::Compressor compressor = compression::Compressor::kMinMaxUInt8;
  if (info->Takes(plan::Param::kCompressor)) {
    const std::string_view chosen = plan.mode().compressor().empty()
                                        ? info->defaults.compressor
                                        : std::string_view(plan.mode().compressor());
    HERD_RETURN_IF_ERROR(plan::CheckCompressor(*info, chosen));
    HERD_ASSIGN_OR_RETURN(compressor, compression::ParseCompressor(chosen));
  }
  HERD_ASSIGN_OR_RETURN(std::unique_ptr<server::ShardedPsClient> client,
                        server::ShardedPsClient::Connect(std::move(o)));
  auto executor = std::make_unique<PsExecutor>(context, mode, compressor, std::move(client));
  HERD_RETURN_IF_ERROR(executor->Start());
  return std::unique_ptr<Executor>(std::move(executor));
}

}  // namespace herd::worker
