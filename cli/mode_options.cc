#include "cli/mode_options.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace herd::cli {
namespace {

// "--block-bytes" for block_bytes.
std::string FlagName(plan::Param p) {
  std::string name(plan::ParamName(p));
  std::replace(name.begin(), name.end(), '_', '-');
  return "--" + name;
}

std::string AppliesTo(plan::Param p) {
  return "; applies to " + plan::JoinForSentence(plan::ModesTaking(p));
}

size_t Index(plan::Param p) { return static_cast<size_t>(p); }

}  // namespace

void ModeOptions::Configure(CLI::App& app) {
  using plan::Param;
  auto add = [&](Param p, auto& value, const std::string& what) {
    flags_[Index(p)] = app.add_option(FlagName(p), value, what + AppliesTo(p));
  };
  add(Param::kTopology, topology_, "Peer topology: ring or random");
  add(Param::kTeams, teams_, "SparDL teams (a divisor of the workers)");
  add(Param::kDensity, density_, "Top-k density, in (0, 1]");
  add(Param::kBlockBytes, block_bytes_, "Pipeline block bytes");
  add(Param::kStaleness, staleness_, "Staleness bound (-1: none)");
  add(Param::kCompressor, compressor_,
      "Compressor: minmax_uint8, sign, fp16, bf16, qsgd[:LEVELS] or topk[:DENSITY] (the "
      "parameter servers serve minmax_uint8 and sign)");
}

bool ModeOptions::Given(plan::Param p) const {
  const CLI::Option* flag = flags_[Index(p)];
  return flag != nullptr && flag->count() > 0;
}

void ModeOptions::Set(plan::Param p, herd::v1::ModeSpec* spec) const {
  switch (p) {
    case plan::Param::kTopology:
      spec->set_topology(topology_);
      return;
    case plan::Param::kTeams:
      spec->set_teams(teams_);
      return;
    case plan::Param::kDensity:
      spec->set_density(density_);
      return;
    case plan::Param::kBlockBytes:
      spec->set_block_bytes(block_bytes_);
      return;
    case plan::Param::kStaleness:
      spec->set_staleness(staleness_);
      return;
    case plan::Param::kCompressor:
      spec->set_compressor(compressor_);
      return;
  }
}

absl::Status ModeOptions::CheckApplies(const std::vector<const plan::ModeInfo*>& modes) const {
  std::vector<std::string_view> names;
  for (const plan::ModeInfo* m : modes) {
    if (std::find(names.begin(), names.end(), m->name) == names.end()) names.push_back(m->name);
  }
  for (plan::Param p : plan::kAllParams) {
    if (!Given(p)) continue;
    const bool applies = std::any_of(modes.begin(), modes.end(),
                                     [p](const plan::ModeInfo* m) { return m->Takes(p); });
    if (!applies) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s does not apply to %s %s; it applies to %s. Remove it, or run a mode that takes it",
          FlagName(p), names.size() == 1 ? "mode" : "the modes", plan::JoinForSentence(names),
          plan::JoinForSentence(plan::ModesTaking(p))));
    }
  }
  return absl::OkStatus();
}

herd::v1::ModeSpec ModeOptions::SpecFor(const plan::ModeInfo& mode) const {
  herd::v1::ModeSpec spec;
  spec.set_mode(std::string(mode.name));
  for (plan::Param p : plan::kAllParams) {
    if (Given(p) && mode.Takes(p)) Set(p, &spec);
  }
  return spec;
}

void ModeOptions::SetAllGiven(herd::v1::ModeSpec* spec) const {
  for (plan::Param p : plan::kAllParams) {
    if (Given(p)) Set(p, spec);
  }
}

}  // namespace herd::cli
