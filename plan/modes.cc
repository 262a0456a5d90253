#include "plan/modes.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace herd::plan {
namespace {

using P = Param;
using S = State;

// GCC 12 warns about every member a designated initializer leaves to its default member
// initializer; leaving them is the point (an entry names only what differs from the defaults).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

// The table. Where a mode runs and what it needs follow from its algorithm (DESIGN.md,
// "Modes"); the state lists are what its executor (worker_state) and the shards' engine
// (server_state) keep between iterations.
constexpr ModeInfo kModes[] = {
    {.name = "allreduce",
     .summary = "WFBP: buckets all-reduced (ring reduce-scatter + all-gather) during backward",
     .runs_on = RunsOn::kWorkers,
     .needs_communicator = true,
     .shrinks = true,
     .worker_state = {S::kParameters, S::kOptimizerSlots}},
    {.name = "dear",
     .summary = "DeAR: reduce-scatter in backward, all-gather overlapped with the next forward",
     .runs_on = RunsOn::kWorkers,
     .needs_communicator = true,
     .shrinks = true,
     .worker_state = {S::kParameters, S::kOptimizerSlots, S::kFusionTuner}},
    {.name = "lp",
     .summary = "Linear-Pipeline all-reduce (a chain, blocks of block_bytes)",
     .runs_on = RunsOn::kWorkers,
     .needs_communicator = true,
     .params = {P::kBlockBytes},
     .shrinks = true,
     .worker_state = {S::kParameters, S::kOptimizerSlots}},
    {.name = "sparse",
     .summary = "SparDL: top-k, Spar-Reduce-Scatter, global residuals, Spar-All-Gather in teams",
     .runs_on = RunsOn::kWorkers,
     .needs_communicator = true,
     .params = {P::kTeams, P::kDensity},
     .floating_only = true,
     .plan_carries = PlanCarries::kTeams,
     .shrinks = true,
     .worker_state = {S::kParameters, S::kOptimizerSlots, S::kSparseResiduals, S::kBsagState}},
    {.name = "topk_allgather",
     .summary = "TopA: all-gather of each worker's top-k",
     .runs_on = RunsOn::kWorkers,
     .needs_communicator = true,
     .params = {P::kDensity},
     .floating_only = true,
     .shrinks = true,
     .worker_state = {S::kParameters, S::kOptimizerSlots, S::kSparseResiduals}},
    {.name = "decentralized",
     .summary = "D_FP_S: average the model with this iteration's peers",
     .runs_on = RunsOn::kWorkers,
     .needs_communicator = true,
     .params = {P::kTopology},
     .floating_only = true,
     .plan_carries = PlanCarries::kPeers,
     .shrinks = true,
     .worker_state = {S::kParameters, S::kOptimizerSlots, S::kOwnReplica}},
    {.name = "decentralized_lp",
     .summary = "D_LP_S: quantised model differences with the ring neighbours' replicas",
     .runs_on = RunsOn::kWorkers,
     .needs_communicator = true,
     .params = {P::kTopology, P::kCompressor},
     .compressors = Compressors::kWorkers,
     .floating_only = true,
     .plan_carries = PlanCarries::kPeers,
     .fixed_peers = true,
     .shrinks = true,
     .worker_state = {S::kParameters, S::kOptimizerSlots, S::kOwnReplica, S::kNeighbourReplicas}},
    {.name = "clps",
     .summary = "C_LP_S: compressed scatter-reduce with error compensation",
     .runs_on = RunsOn::kWorkers,
     .needs_communicator = true,
     .params = {P::kCompressor},
     .compressors = Compressors::kWorkers,
     .floating_only = true,
     .shrinks = true,
     .worker_state = {S::kParameters, S::kOptimizerSlots, S::kErrorFeedback}},
    {.name = "ps_sync",
     .summary = "parameter servers: a round sums the M pushes and applies the optimizer",
     .runs_on = RunsOn::kServers,
     .needs_servers = true,
     .floating_only = true,
     .server_engine = ServerEngine::kSync,
     .shrinks = true,
     .takes_no_newcomer = true,
     .worker_state = {S::kClocks},
     .server_state = {S::kParameters, S::kOptimizerSlots, S::kClocks}},
    {.name = "ps_async",
     .summary = "parameter servers: each push applied at once, bounded staleness",
     .runs_on = RunsOn::kServers,
     .needs_servers = true,
     .params = {P::kStaleness},
     .floating_only = true,
     .server_engine = ServerEngine::kAsync,
     .survives_worker_loss = true,
     .worker_state = {S::kClocks},
     .server_state = {S::kParameters, S::kOptimizerSlots, S::kClocks}},
    {.name = "ps_ec",
     .summary = "parameter servers: compressed pushes and pulls, error feedback on both sides",
     .runs_on = RunsOn::kServers,
     .needs_servers = true,
     .params = {P::kCompressor},
     .compressors = Compressors::kServers,
     .floating_only = true,
     .server_engine = ServerEngine::kErrorCompensated,
     .shrinks = true,
     .takes_no_newcomer = true,
     .worker_state = {S::kParameters, S::kOptimizerSlots, S::kErrorFeedback, S::kClocks},
     .server_state = {S::kErrorFeedback, S::kClocks}},
};

#pragma GCC diagnostic pop

constexpr std::string_view kWorkerCompressorText =
    "minmax_uint8, sign, fp16, bf16, qsgd[:LEVELS] or topk[:DENSITY]";

// The compressors the workers implement (algorithms/compression/compressor.h): the plain names,
// qsgd:LEVELS (1..127) and topk:DENSITY ((0, 1]). The workers parse the parameters again.
bool WorkersCompress(std::string_view name) {
  if (name == "minmax_uint8" || name == "sign" || name == "fp16" || name == "bf16" ||
      name == "qsgd" || name == "topk") {
    return true;
  }
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

bool ServersCompress(std::string_view name) { return name == "minmax_uint8" || name == "sign"; }

}  // namespace

std::string_view ParamName(Param p) {
  switch (p) {
    case Param::kTopology:
      return "topology";
    case Param::kTeams:
      return "teams";
    case Param::kDensity:
      return "density";
    case Param::kBlockBytes:
      return "block_bytes";
    case Param::kStaleness:
      return "staleness";
    case Param::kCompressor:
      return "compressor";
  }
  return "?";
}

std::span<const ModeInfo> Modes() { return kModes; }

const ModeInfo* FindMode(std::string_view name) {
  for (const ModeInfo& m : kModes) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

absl::StatusOr<const ModeInfo*> LookUpMode(std::string_view name) {
  if (const ModeInfo* m = FindMode(name)) return m;
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown mode '%s'; known modes: %s", name, ModeNameList()));
}

std::string ModeNameList() {
  std::vector<std::string> names;
  for (const ModeInfo& m : kModes) names.emplace_back(m.name);
  return absl::StrJoin(names, ", ");
}

std::vector<std::string_view> ModesTaking(Param p) {
  std::vector<std::string_view> names;
  for (const ModeInfo& m : kModes) {
    if (m.Takes(p)) names.push_back(m.name);
  }
  return names;
}

absl::Status CheckCompressor(const ModeInfo& mode, std::string_view compressor) {
  if (mode.compressors == Compressors::kNone) {
    return absl::InvalidArgumentError(
        absl::StrFormat("mode '%s' takes no compressor (got '%s')", mode.name, compressor));
  }
  if (!WorkersCompress(compressor)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("unknown compressor '%s'; use %s", compressor, kWorkerCompressorText));
  }
  // The shards implement fewer compressors than the workers; refusing the others keeps a job
  // no shard could serve from being accepted.
  if (mode.compressors == Compressors::kServers && !ServersCompress(compressor)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "compressor '%s' is not served by parameter servers; %s takes minmax_uint8 or sign",
        compressor, mode.name));
  }
  return absl::OkStatus();
}

const ModeInfo* ModeServedBy(ServerEngine engine) {
  if (engine == ServerEngine::kNone) return nullptr;
  for (const ModeInfo& m : kModes) {
    if (m.server_engine == engine) return &m;
  }
  return nullptr;
}

std::string JoinForSentence(const std::vector<std::string_view>& names) {
  if (names.empty()) return "";
  std::string out(names[0]);
  for (size_t i = 1; i < names.size(); ++i) {
    out += i + 1 == names.size() ? " and " : ", ";
    out += names[i];
  }
  return out;
}

}  // namespace herd::plan
