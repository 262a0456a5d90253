#include "scheduler/job_spec.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_format.h"
#include "common/dtype.h"
#include "common/status.h"
#include "plan/modes.h"
#include "plan/topology.h"

namespace herd::scheduler {
namespace {

using herd::v1::JobSpec;
using herd::v1::ModeSpec;

constexpr int64_t kDefaultChunkBytes = 1 << 20;
constexpr int32_t kUnboundedStaleness = -1;  // job.proto: no bound (fully asynchronous)
constexpr int32_t kMaxProcesses = 65536;
constexpr int kMaxTensors = 1 << 20;

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

}  // namespace

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
    if (out.teams() < 1) {
      return absl::InvalidArgumentError(absl::StrFormat("teams must be >= 1, got %d", out.teams()));
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
    if (out.block_bytes() < 1) {
      return absl::InvalidArgumentError(
          absl::StrFormat("block_bytes must be >= 1, got %d", out.block_bytes()));
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

  if (!in.has_mode() || in.mode().mode().empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("job '%s' has no mode; known modes: %s", in.name(), plan::ModeNameList()));
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
