#include "scheduler/job_spec.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <set>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/dtype.h"
#include "common/status.h"
#include "plan/modes.h"
#include "plan/shard_map.h"
#include "plan/topology.h"
#include "scheduler/bounds.h"
#include "scheduler/elastic_spec.h"
#include "scheduler/limits.h"

namespace herd::scheduler {
namespace {

using herd::v1::JobSpec;
using herd::v1::ModeSpec;

constexpr int64_t kDefaultChunkBytes = 1 << 20;
constexpr int32_t kUnboundedStaleness = -1;  // job.proto: no bound (fully asynchronous)

const std::set<std::string, std::less<>> kOptimizers = {"sgd", "momentum", "adam"};

absl::Status NotForMode(plan::Param param, std::string_view mode) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "parameter '%s' does not apply to mode '%s'; remove it", plan::ParamName(param), mode));
}

// Whether `in` sets parameter `p` (unset: the proto default; staleness has presence, since 0
// is a valid bound).
bool Sets(const ModeSpec& in, plan::Param p) {
  switch (p) {
    case plan::Param::kTopology:
      return !in.topology().empty();
    case plan::Param::kTeams:
      return in.teams() != 0;
    case plan::Param::kDensity:
      return in.density() != 0;
    case plan::Param::kBlockBytes:
      return in.block_bytes() != 0;
    case plan::Param::kStaleness:
      return in.has_staleness();
    case plan::Param::kCompressor:
      return !in.compressor().empty();
  }
  return false;
}

std::atomic<int64_t> g_max_shard_state_bytes{kDefaultMaxShardStateBytes};

// RESOURCE_EXHAUSTED when the fullest shard of `spec` in ps_* mode `mode` holds more state than
// the limit.
absl::Status CheckShardState(const JobSpec& spec, std::string_view mode) {
  int shard = 0;
  const int64_t need = ShardStateBytes(spec, mode, &shard);
  const int64_t limit = MaxShardStateBytes();
  if (need <= limit) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "job '%s' in mode %s gives shard %d of its %d servers %d bytes of state (%.1f GiB: "
      "parameters, optimizer slots and round buffers), more than the %d bytes one shard may "
      "hold (herd scheduler --max-shard-state-bytes); use more servers, or a larger limit where "
      "the shards have the memory",
      spec.name(), mode, shard, spec.servers(), need, need / 1073741824.0, limit));
}

}  // namespace

void SetMaxShardStateBytes(int64_t bytes) {
  g_max_shard_state_bytes.store(bytes > 0 ? bytes : kDefaultMaxShardStateBytes);
}

int64_t MaxShardStateBytes() { return g_max_shard_state_bytes.load(); }

int64_t ShardStateBytes(const JobSpec& spec, std::string_view mode, int* shard) {
  const plan::ModeInfo* m = plan::FindMode(mode);
  if (m == nullptr || m->server_engine == plan::ServerEngine::kNone || spec.servers() < 1) {
    return 0;
  }
  const std::string& opt = spec.optimizer().name();
  int64_t per_element = 1 + (opt == "momentum" ? 1 : opt == "adam" ? 2 : 0);
  if (m->server_engine != plan::ServerEngine::kAsync) per_element += 1;             // accumulator
  if (m->server_engine == plan::ServerEngine::kErrorCompensated) per_element += 1;  // residual
  std::vector<plan::TensorLayout> layout;
  for (const auto& t : spec.tensors()) {
    int64_t elements = 1;
    for (int64_t d : t.shape()) elements *= d;  // bounded by NormalizeJobSpec
    auto dt = ParseDType(t.dtype());
    layout.push_back({elements, dt.ok() ? static_cast<int64_t>(DTypeSize(*dt)) : 1});
  }
  std::vector<int64_t> elements(static_cast<size_t>(spec.servers()), 0);
  for (const auto& c : plan::ShardMap(layout, spec.chunk_bytes(), spec.servers())) {
    elements[static_cast<size_t>(c.server)] += c.count;
  }
  const auto fullest = std::max_element(elements.begin(), elements.end());
  if (shard != nullptr) *shard = static_cast<int>(fullest - elements.begin());
  // <= 2^40 elements of a model times <= 5: no overflow.
  return *fullest * per_element * static_cast<int64_t>(sizeof(float));
}

absl::Status CheckCheckpointPath(std::string_view what, std::string_view path) {
  if (path.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s holds a NUL byte (at %d): no file name can", what, path.find('\0')));
  }
  if (path.empty() || path.front() != '/') {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s '%s' is not an absolute path: the scheduler and every process of the job resolve it, "
        "each in its own working directory; give an absolute path",
        what, Echo(path)));
  }
  const std::string normal = std::filesystem::path(path).lexically_normal().string();
  for (std::string_view pseudo : {"/proc", "/sys", "/dev"}) {
    if (normal == pseudo || normal.starts_with(std::string(pseudo) + "/")) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s '%s' is on %s, a pseudo file system that cannot hold checkpoints",
                          what, Echo(path), pseudo));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateJobName(std::string_view name) {
  auto ok_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
  };
  const bool ok = !name.empty() && name.size() <= limits::kMaxJobNameBytes && ok_char(name[0]) &&
                  name[0] != '.' && name[0] != '_' && name[0] != '-' &&
                  std::all_of(name.begin(), name.end(), ok_char);
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "job name '%s' is not valid: use 1-%d characters of [a-z0-9._-], starting with a letter "
        "or digit",
        Echo(name), limits::kMaxJobNameBytes));
  }
  return absl::OkStatus();
}

absl::StatusOr<ModeSpec> NormalizeMode(const ModeSpec& in, const JobSpec& spec) {
  // The words are echoed in messages and stored: bounded before anything looks them up.
  HERD_RETURN_IF_ERROR(CheckText("mode", in.mode(), limits::kMaxWordBytes));
  HERD_RETURN_IF_ERROR(CheckText("topology", in.topology(), limits::kMaxWordBytes, true));
  HERD_RETURN_IF_ERROR(CheckText("compressor", in.compressor(), limits::kMaxWordBytes, true));
  HERD_ASSIGN_OR_RETURN(const plan::ModeInfo* m, plan::LookUpMode(in.mode()));
  ModeSpec out = in;
  // Parameters that do not apply are rejected rather than ignored: a typo must not be silent.
  for (plan::Param p : plan::kAllParams) {
    if (Sets(in, p) && !m->Takes(p)) return NotForMode(p, in.mode());
  }
  const plan::ParamDefaults& defaults = m->defaults;

  if (m->Takes(plan::Param::kTopology)) {
    if (out.topology().empty()) out.set_topology(std::string(defaults.topology));
    auto topology = plan::ParseTopology(out.topology());
    if (!topology.ok()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "unknown topology '%s' for mode '%s'; use ring or random", out.topology(), in.mode()));
    }
    // A mode that keeps replicas of its neighbours' models needs the neighbours to stay the same.
    if (m->fixed_peers && *topology != plan::Topology::kRing) {
      return absl::InvalidArgumentError(
          absl::StrFormat("mode %s needs fixed neighbours (it keeps replicas of their models); "
                          "topology '%s' changes them every iteration: use ring",
                          in.mode(), out.topology()));
    }
  }
  if (m->Takes(plan::Param::kTeams)) {
    if (out.teams() == 0) out.set_teams(defaults.teams);
    if (out.teams() < 1 || out.teams() > limits::kMaxWorkers) {
      return absl::InvalidArgumentError(absl::StrFormat("teams must be between 1 and %d, got %d",
                                                        limits::kMaxWorkers, out.teams()));
    }
    if (spec.workers() % out.teams() != 0) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "mode '%s' with %d teams needs a worker count divisible by %d; job '%s' has %d workers",
          in.mode(), out.teams(), out.teams(), spec.name(), spec.workers()));
    }
  }
  if (m->Takes(plan::Param::kDensity)) {
    if (out.density() == 0) out.set_density(defaults.density);
    if (!(out.density() > 0 && out.density() <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("density must be in (0, 1], got %g", out.density()));
    }
  }
  if (m->Takes(plan::Param::kBlockBytes)) {
    if (out.block_bytes() == 0) out.set_block_bytes(defaults.block_bytes);
    if (out.block_bytes() < 1 || out.block_bytes() > limits::kMaxBlockBytes) {
      return absl::InvalidArgumentError(
          absl::StrFormat("block_bytes must be between 1 and %d, got %d", limits::kMaxBlockBytes,
                          out.block_bytes()));
    }
  }
  if (m->Takes(plan::Param::kStaleness)) {
    if (!in.has_staleness()) out.set_staleness(defaults.staleness);
    if (out.staleness() < kUnboundedStaleness) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "staleness must be >= 0, or -1 (inf in YAML) for none, got %d", out.staleness()));
    }
  }
  if (m->Takes(plan::Param::kCompressor)) {
    if (out.compressor().empty()) out.set_compressor(std::string(defaults.compressor));
    HERD_RETURN_IF_ERROR(plan::CheckCompressor(*m, out.compressor()));
  }
  if (m->needs_servers && spec.servers() < 1) {
    return absl::FailedPreconditionError(
        absl::StrFormat("mode '%s' needs parameter servers; job '%s' has none (servers: 0)",
                        in.mode(), spec.name()));
  }
  // Memory the job asks for is memory a shard must have: checked against the shard map.
  if (m->server_engine != plan::ServerEngine::kNone) {
    HERD_RETURN_IF_ERROR(CheckShardState(spec, in.mode()));
  }
  if (m->floating_only) {
    for (const auto& t : spec.tensors()) {
      auto dt = ParseDType(t.dtype());
      if (dt.ok() && !IsFloating(*dt)) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "mode '%s' averages, compresses or optimizes floating-point tensors; tensor '%s' of "
            "job '%s' is %s",
            in.mode(), t.name(), spec.name(), t.dtype()));
      }
    }
  }
  return out;
}

absl::StatusOr<JobSpec> NormalizeJobSpec(const JobSpec& in) {
  JobSpec out = in;
  if (auto st = ValidateJobName(in.name()); !st.ok()) return st;
  if (in.workers() < 1 || in.workers() > limits::kMaxWorkers) {
    return absl::InvalidArgumentError(
        absl::StrFormat("job '%s': workers must be between 1 and %d, got %d", in.name(),
                        limits::kMaxWorkers, in.workers()));
  }
  if (auto st = NormalizeElasticSpec(out); !st.ok()) return st;
  if (in.servers() < 0 || in.servers() > limits::kMaxServers) {
    return absl::InvalidArgumentError(
        absl::StrFormat("job '%s': servers must be between 0 and %d, got %d", in.name(),
                        limits::kMaxServers, in.servers()));
  }
  // No tensors: the first worker declares its model's layout (DeclareModel), and the job
  // starts once it has.
  if (in.tensors_size() > limits::kMaxTensors) {
    return absl::InvalidArgumentError(absl::StrFormat("job '%s' lists %d tensors, more than %d",
                                                      in.name(), in.tensors_size(),
                                                      limits::kMaxTensors));
  }
  if (in.chunk_bytes() < 0 || in.chunk_bytes() > limits::kMaxChunkBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("job '%s': chunk_bytes must be between 1 and %d (0: the default), got %d",
                        in.name(), limits::kMaxChunkBytes, in.chunk_bytes()));
  }
  if (in.chunk_bytes() == 0) out.set_chunk_bytes(kDefaultChunkBytes);
  std::set<std::string, std::less<>> names;
  int64_t model_elements = 0;
  for (int i = 0; i < in.tensors_size(); ++i) {
    const auto& t = in.tensors(i);
    HERD_RETURN_IF_ERROR(
        CheckText(absl::StrFormat("job '%s': the name of tensor #%d", in.name(), i), t.name(),
                  limits::kMaxTensorNameBytes));
    if (!names.insert(t.name()).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("job '%s': tensor name '%s' appears twice (#%d); names must be unique",
                          in.name(), t.name(), i));
    }
    HERD_RETURN_IF_ERROR(
        CheckText(absl::StrFormat("job '%s': the dtype of tensor '%s'", in.name(), t.name()),
                  t.dtype(), limits::kMaxWordBytes, /*may_be_empty=*/true));
    auto dt = ParseDType(t.dtype());
    if (!dt.ok()) {
      return absl::InvalidArgumentError(absl::StrFormat("job '%s': tensor '%s' has dtype '%s': %s",
                                                        in.name(), t.name(), t.dtype(),
                                                        std::string(dt.status().message())));
    }
    // Canonical dtype names, so plans and status print one spelling.
    out.mutable_tensors(i)->set_dtype(std::string(DTypeName(*dt)));
    if (t.shape_size() > limits::kMaxTensorRank) {
      return absl::InvalidArgumentError(
          absl::StrFormat("job '%s': tensor '%s' has %d dimensions, more than %d", in.name(),
                          t.name(), t.shape_size(), limits::kMaxTensorRank));
    }
    int64_t elements = 1;
    for (int64_t d : t.shape()) {
      if (d < 1) {
        return absl::InvalidArgumentError(
            absl::StrFormat("job '%s': tensor '%s' has dimension %d; every dimension must be >= 1",
                            in.name(), t.name(), d));
      }
      if (elements > limits::kMaxTensorElements / d) {
        return absl::InvalidArgumentError(
            absl::StrFormat("job '%s': tensor '%s' has more than %d elements (2^40)", in.name(),
                            t.name(), limits::kMaxTensorElements));
      }
      elements *= d;
    }
    model_elements += elements;  // <= 2^14 tensors of <= 2^40 elements: no overflow
    if (model_elements > limits::kMaxModelElements) {
      return absl::InvalidArgumentError(
          absl::StrFormat("job '%s': the model has more than %d elements (2^40) by tensor '%s'",
                          in.name(), limits::kMaxModelElements, t.name()));
    }
  }
  // Every plan lists the shard map, built under the scheduler's lock: its size is bounded here,
  // in closed form, before any map exists.
  if (in.servers() > 0) {
    const int64_t entries = ShardEntryCount(out);
    if (entries > limits::kMaxShardEntries) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "job '%s': the model makes %d shard-map chunks of chunk_bytes %d, more than %d; use a "
          "larger chunk_bytes (at most %d)",
          in.name(), entries, out.chunk_bytes(), limits::kMaxShardEntries, limits::kMaxChunkBytes));
    }
  }

  auto* opt = out.mutable_optimizer();
  HERD_RETURN_IF_ERROR(CheckText(absl::StrFormat("job '%s': optimizer name", in.name()),
                                 opt->name(), limits::kMaxWordBytes, /*may_be_empty=*/true));
  if (opt->name().empty()) opt->set_name("sgd");
  if (!kOptimizers.contains(opt->name())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "job '%s': unknown optimizer '%s'; use sgd, momentum or adam", in.name(), opt->name()));
  }
  if (opt->learning_rate() == 0) opt->set_learning_rate(0.01);
  // Written as !(in range) so NaN fails too; infinities fail the upper bound.
  if (!(opt->learning_rate() > 0 && opt->learning_rate() <= limits::kMaxLearningRate)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("job '%s': learning_rate must be finite, > 0 and <= %g, got %g", in.name(),
                        limits::kMaxLearningRate, opt->learning_rate()));
  }
  if (opt->name() == "momentum" && opt->momentum() == 0) opt->set_momentum(0.9);
  if (!(opt->momentum() >= 0 && opt->momentum() < 1)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "job '%s': momentum must be in [0, 1), got %g", in.name(), opt->momentum()));
  }
  if (!(opt->weight_decay() >= 0 && opt->weight_decay() <= limits::kMaxWeightDecay)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("job '%s': weight_decay must be finite, >= 0 and <= %g, got %g", in.name(),
                        limits::kMaxWeightDecay, opt->weight_decay()));
  }

  auto* training = out.mutable_training();
  HERD_RETURN_IF_ERROR(CheckText(absl::StrFormat("job '%s': training model", in.name()),
                                 training->model(), limits::kMaxWordBytes, true));
  if (training->model().empty()) training->set_model("cnn");
  // "program": the workers run their own training program (the Python front end's script),
  // whose model declares the layout.
  if (training->model() != "cnn" && training->model() != "mlp" && training->model() != "program") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "job '%s': unknown model '%s'; the workers train mlp or cnn, or their own (program)",
        in.name(), training->model()));
  }
  if (training->epochs() == 0) training->set_epochs(1);
  if (training->epochs() < 1 || training->epochs() > 10000) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "job '%s': epochs must be between 1 and 10000, got %d", in.name(), training->epochs()));
  }
  if (training->batch_size() == 0) training->set_batch_size(64);
  if (training->batch_size() < 1 || training->batch_size() > 65536) {
    return absl::InvalidArgumentError(
        absl::StrFormat("job '%s': batch_size must be between 1 and 65536, got %d", in.name(),
                        training->batch_size()));
  }
  if (training->train_samples() < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("job '%s': train_samples must be >= 0 (0: all), got %d", in.name(),
                        training->train_samples()));
  }

  const auto& ckpt = in.checkpoint();
  if (ckpt.every_iterations() < 0 || ckpt.every_ms() < 0 || ckpt.keep_last() < 0 ||
      ckpt.keep_every() < 0 || ckpt.timeout_ms() < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "job '%s': checkpoint every, keep_last, keep_every and timeout must be >= 0", in.name()));
  }
  if (ckpt.dir().empty() && (ckpt.every_iterations() > 0 || ckpt.every_ms() > 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "job '%s': checkpoint 'every' needs a 'dir' to write the checkpoints to", in.name()));
  }
  if (ckpt.every_iterations() > 0 && ckpt.every_ms() > 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "job '%s': checkpoint 'every' is a number of iterations or a duration, not both",
        in.name()));
  }
  if (ckpt.dir().size() > 4096 || in.resume_from().size() > 4096) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "job '%s': checkpoint and resume paths have at most 4096 bytes", in.name()));
  }
  if (!ckpt.dir().empty()) {
    HERD_RETURN_IF_ERROR(
        CheckCheckpointPath(absl::StrFormat("job '%s': checkpoint.dir", in.name()), ckpt.dir()));
  }
  if (!in.resume_from().empty()) {
    HERD_RETURN_IF_ERROR(
        CheckCheckpointPath(absl::StrFormat("job '%s': resume_from", in.name()), in.resume_from()));
  }

  if (!in.has_mode() || in.mode().mode().empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("job '%s' has no mode; known modes: %s", in.name(), plan::ModeNameList()));
  }
  auto mode = NormalizeMode(in.mode(), out);
  if (!mode.ok()) {
    // At submission every inconsistency is in the spec itself; a quota stays a quota.
    if (absl::IsResourceExhausted(mode.status())) return mode.status();
    return absl::InvalidArgumentError(std::string(mode.status().message()));
  }
  *out.mutable_mode() = *mode;
  // A mode that takes no newcomer never grows: a max_workers above workers would never apply.
  const plan::ModeInfo* info = plan::FindMode(mode->mode());
  if (out.has_elastic() && info != nullptr && info->takes_no_newcomer &&
      out.elastic().max_workers() > out.workers()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "job '%s': elastic max_workers %d is above workers (%d), but mode %s never grows (a "
        "round sums the pushes of the workers the job started with); set max_workers to %d or "
        "leave it out",
        in.name(), out.elastic().max_workers(), out.workers(), mode->mode(), out.workers()));
  }
  return out;
}

}  // namespace herd::scheduler
