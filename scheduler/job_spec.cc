#include "scheduler/job_spec.h"

#include <algorithm>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/dtype.h"

namespace herd::scheduler {
namespace {

using herd::v1::JobSpec;
using herd::v1::ModeSpec;

constexpr int64_t kDefaultChunkBytes = 1 << 20;
constexpr int64_t kDefaultBlockBytes = 1 << 20;
constexpr double kDefaultDensity = 0.01;
constexpr int32_t kDefaultStaleness = 4;
constexpr int32_t kUnboundedStaleness = -1;  // job.proto: no bound (fully asynchronous)
constexpr int32_t kMaxProcesses = 65536;
constexpr int kMaxTensors = 1 << 20;

// What each mode needs and which parameters apply to it.
struct ModeInfo {
  std::string_view name;
  bool needs_servers = false;
  bool floating_only = false;  // averages, quantises or applies an optimizer
  bool topology = false;
  bool teams = false;
  bool density = false;
  bool block_bytes = false;
  bool staleness = false;
  bool compressor = false;
};

constexpr ModeInfo kModes[] = {
    {"allreduce"},
    {"dear"},
    {"lp", false, false, false, false, false, true},
    {"sparse", false, true, false, true, true},
    {"topk_allgather", false, true, false, false, true},
    {"decentralized", false, true, true},
    {"decentralized_lp", false, true, true, false, false, false, false, true},
    {"clps", false, true, false, false, false, false, false, true},
    {"ps_sync", true, true},
    {"ps_async", true, true, false, false, false, false, true},
    {"ps_ec", true, true, false, false, false, false, false, true},
};

const ModeInfo* FindMode(std::string_view name) {
  for (const auto& m : kModes) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

const std::set<std::string, std::less<>> kTopologies = {"ring", "random"};
// The compressors the workers implement (algorithms/compression/compressor.h): the plain names,
// and qsgd:LEVELS (1..127), topk:DENSITY ((0, 1]). The workers parse the parameters again.
bool KnownCompressor(std::string_view name) {
  static const std::set<std::string, std::less<>> plain = {"minmax_uint8", "sign", "fp16",
                                                           "bf16",         "qsgd", "topk"};
  if (plain.contains(name)) return true;
  if (name.substr(0, 5) == "qsgd:") {
    int levels = 0;
    return absl::SimpleAtoi(std::string(name.substr(5)), &levels) && levels >= 1 && levels <= 127;
  }
  if (name.substr(0, 5) == "topk:") {
    double density = 0;
    return absl::SimpleAtod(std::string(name.substr(5)), &density) && density > 0 && density <= 1;
  }
  return false;
}
const std::set<std::string, std::less<>> kOptimizers = {"sgd", "momentum", "adam"};

absl::Status NotForMode(std::string_view param, std::string_view mode) {
  return absl::InvalidArgumentError(
      absl::StrFormat("parameter '%s' does not apply to mode '%s'; remove it", param, mode));
}

}  // namespace

const std::vector<std::string>& ModeNames() {
  static const auto* names = [] {
    auto* v = new std::vector<std::string>;
    for (const auto& m : kModes) v->emplace_back(m.name);
    return v;
  }();
  return *names;
}

bool IsDecentralizedMode(std::string_view mode) {
  const ModeInfo* m = FindMode(mode);
  return m != nullptr && m->topology;
}

absl::Status ValidateJobName(std::string_view name) {
  auto ok_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
  };
  const bool ok = !name.empty() && name.size() <= 63 && ok_char(name[0]) && name[0] != '.' &&
                  name[0] != '_' && name[0] != '-' &&
                  std::all_of(name.begin(), name.end(), ok_char);
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "job name '%s' is not valid: use 1-63 characters of [a-z0-9._-], starting with a letter "
        "or digit",
        name));
  }
  return absl::OkStatus();
}

absl::StatusOr<ModeSpec> NormalizeMode(const ModeSpec& in, const JobSpec& spec) {
  const ModeInfo* m = FindMode(in.mode());
  if (m == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat("unknown mode '%s'; known modes: %s",
                                                      in.mode(), absl::StrJoin(ModeNames(), ", ")));
  }
  ModeSpec out = in;
  // Parameters that do not apply are rejected rather than ignored: a typo must not be silent.
  if (!in.topology().empty() && !m->topology) return NotForMode("topology", in.mode());
  if (in.teams() != 0 && !m->teams) return NotForMode("teams", in.mode());
  if (in.density() != 0 && !m->density) return NotForMode("density", in.mode());
  if (in.block_bytes() != 0 && !m->block_bytes) return NotForMode("block_bytes", in.mode());
  if (in.has_staleness() && !m->staleness) return NotForMode("staleness", in.mode());
  if (!in.compressor().empty() && !m->compressor) return NotForMode("compressor", in.mode());

  if (m->topology) {
    if (out.topology().empty()) out.set_topology("ring");
    if (!kTopologies.contains(out.topology())) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "unknown topology '%s' for mode '%s'; use ring or random", out.topology(), in.mode()));
    }
    // D_LP_S keeps replicas of its neighbours' models: the neighbours must stay the same.
    if (in.mode() == "decentralized_lp" && out.topology() != "ring") {
      return absl::InvalidArgumentError(absl::StrFormat(
          "mode decentralized_lp needs fixed neighbours (it keeps replicas of their models); "
          "topology '%s' changes them every iteration: use ring",
          out.topology()));
    }
  }
  if (m->teams) {
    if (out.teams() == 0) out.set_teams(1);
    if (out.teams() < 1) {
      return absl::InvalidArgumentError(absl::StrFormat("teams must be >= 1, got %d", out.teams()));
    }
    if (spec.workers() % out.teams() != 0) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "mode '%s' with %d teams needs a worker count divisible by %d; job '%s' has %d workers",
          in.mode(), out.teams(), out.teams(), spec.name(), spec.workers()));
    }
  }
  if (m->density) {
    if (out.density() == 0) out.set_density(kDefaultDensity);
    if (!(out.density() > 0 && out.density() <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("density must be in (0, 1], got %g", out.density()));
    }
  }
  if (m->block_bytes) {
    if (out.block_bytes() == 0) out.set_block_bytes(kDefaultBlockBytes);
    if (out.block_bytes() < 1) {
      return absl::InvalidArgumentError(
          absl::StrFormat("block_bytes must be >= 1, got %d", out.block_bytes()));
    }
  }
  if (m->staleness) {
    if (!in.has_staleness()) out.set_staleness(kDefaultStaleness);
    if (out.staleness() < kUnboundedStaleness) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "staleness must be >= 0, or -1 (inf in YAML) for none, got %d", out.staleness()));
    }
  }
  if (m->compressor) {
    if (out.compressor().empty()) out.set_compressor("minmax_uint8");
    if (!KnownCompressor(out.compressor())) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "unknown compressor '%s'; use minmax_uint8, sign, fp16, bf16, qsgd[:LEVELS] or "
          "topk[:DENSITY]",
          out.compressor()));
    }
    // The shards implement these two (algorithms/compression); refusing the others here keeps
    // a job no shard could serve from being accepted.
    if (m->needs_servers && out.compressor() != "minmax_uint8" && out.compressor() != "sign") {
      return absl::InvalidArgumentError(absl::StrFormat(
          "compressor '%s' is not served by parameter servers; %s takes minmax_uint8 or sign",
          out.compressor(), in.mode()));
    }
  }
  if (m->needs_servers && spec.servers() < 1) {
    return absl::FailedPreconditionError(
        absl::StrFormat("mode '%s' needs parameter servers; job '%s' has none (servers: 0)",
                        in.mode(), spec.name()));
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
  if (in.workers() < 1 || in.workers() > kMaxProcesses) {
    return absl::InvalidArgumentError(
        absl::StrFormat("job '%s': workers must be between 1 and %d, got %d", in.name(),
                        kMaxProcesses, in.workers()));
  }
  if (in.servers() < 0 || in.servers() > kMaxProcesses) {
    return absl::InvalidArgumentError(
        absl::StrFormat("job '%s': servers must be between 0 and %d, got %d", in.name(),
                        kMaxProcesses, in.servers()));
  }
  // No tensors: the first worker declares its model's layout (DeclareModel), and the job
  // starts once it has.
  if (in.tensors_size() > kMaxTensors) {
    return absl::InvalidArgumentError(absl::StrFormat("job '%s' lists %d tensors, more than %d",
                                                      in.name(), in.tensors_size(), kMaxTensors));
  }
  std::set<std::string, std::less<>> names;
  for (int i = 0; i < in.tensors_size(); ++i) {
    const auto& t = in.tensors(i);
    if (t.name().empty()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("job '%s': tensor #%d has no name", in.name(), i));
    }
    if (!names.insert(t.name()).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("job '%s': tensor name '%s' appears twice (#%d); names must be unique",
                          in.name(), t.name(), i));
    }
    auto dt = ParseDType(t.dtype());
    if (!dt.ok()) {
      return absl::InvalidArgumentError(absl::StrFormat("job '%s': tensor '%s' has dtype '%s': %s",
                                                        in.name(), t.name(), t.dtype(),
                                                        std::string(dt.status().message())));
    }
    // Canonical dtype names, so plans and status print one spelling.
    out.mutable_tensors(i)->set_dtype(std::string(DTypeName(*dt)));
    int64_t elements = 1;
    for (int64_t d : t.shape()) {
      if (d < 1) {
        return absl::InvalidArgumentError(
            absl::StrFormat("job '%s': tensor '%s' has dimension %d; every dimension must be >= 1",
                            in.name(), t.name(), d));
      }
      // 2^48 elements is far beyond any model tensor and keeps byte counts in int64.
      if (elements > (int64_t{1} << 48) / d) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "job '%s': tensor '%s' has more than 2^48 elements", in.name(), t.name()));
      }
      elements *= d;
    }
  }
  if (in.chunk_bytes() < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("job '%s': chunk_bytes must be >= 1, got %d", in.name(), in.chunk_bytes()));
  }
  if (in.chunk_bytes() == 0) out.set_chunk_bytes(kDefaultChunkBytes);

  auto* opt = out.mutable_optimizer();
  if (opt->name().empty()) opt->set_name("sgd");
  if (!kOptimizers.contains(opt->name())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "job '%s': unknown optimizer '%s'; use sgd, momentum or adam", in.name(), opt->name()));
  }
  if (opt->learning_rate() == 0) opt->set_learning_rate(0.01);
  if (!(opt->learning_rate() > 0)) {
    return absl::InvalidArgumentError(absl::StrFormat("job '%s': learning_rate must be > 0, got %g",
                                                      in.name(), opt->learning_rate()));
  }
  if (opt->name() == "momentum" && opt->momentum() == 0) opt->set_momentum(0.9);
  if (!(opt->momentum() >= 0 && opt->momentum() < 1)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "job '%s': momentum must be in [0, 1), got %g", in.name(), opt->momentum()));
  }
  if (!(opt->weight_decay() >= 0)) {
    return absl::InvalidArgumentError(absl::StrFormat("job '%s': weight_decay must be >= 0, got %g",
                                                      in.name(), opt->weight_decay()));
  }

  auto* training = out.mutable_training();
  if (training->model().empty()) training->set_model("cnn");
  if (training->model() != "cnn" && training->model() != "mlp") {
    return absl::InvalidArgumentError(
        absl::StrFormat("job '%s': unknown model '%s'; the workers train mlp or cnn", in.name(),
                        training->model()));
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

  if (!in.has_mode() || in.mode().mode().empty()) {
    return absl::InvalidArgumentError(absl::StrFormat("job '%s' has no mode; known modes: %s",
                                                      in.name(), absl::StrJoin(ModeNames(), ", ")));
  }
  auto mode = NormalizeMode(in.mode(), out);
  if (!mode.ok()) {
    // At submission every inconsistency is in the spec itself.
    return absl::InvalidArgumentError(std::string(mode.status().message()));
  }
  *out.mutable_mode() = *mode;
  return out;
}

}  // namespace herd::scheduler
