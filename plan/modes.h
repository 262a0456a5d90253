#pragma once
// The mode registry: what herd knows about each training mode, in one table (plan/modes.cc).
// The scheduler validates ModeSpecs against it and reads what a plan carries; the shards and
// the worker's executors choose their behaviour from it; the command line derives its help
// texts from it and refuses options that apply to none of a job's modes. Adding a mode is one
// entry in the table, its executor (worker/executors/) and its builder line
// (worker/executor_factory.cc).
//
// Pure (no gRPC, no protobuf). The table is constant and built at compile time: every function
// here is thread-safe, and a ModeInfo pointer stays valid for the life of the process.

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace herd::plan {

// A set of values of a small enum (every value below 32).
template <typename E>
class EnumSet {
 public:
  constexpr EnumSet() = default;
  constexpr EnumSet(std::initializer_list<E> values) {
    for (E v : values) bits_ |= Bit(v);
  }
  constexpr bool contains(E v) const { return (bits_ & Bit(v)) != 0; }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr bool operator==(const EnumSet&) const = default;

 private:
  static constexpr uint32_t Bit(E v) { return uint32_t{1} << static_cast<uint32_t>(v); }
  uint32_t bits_ = 0;
};

// Where a mode's reduction runs.
enum class RunsOn : uint8_t {
  kWorkers,  // collectives among the workers
  kServers,  // the parameter-server shards: workers push gradients and pull the result
};

// The parameters of a ModeSpec (herd/v1/job.proto) that a mode may take.
enum class Param : uint8_t { kTopology, kTeams, kDensity, kBlockBytes, kStaleness, kCompressor };
inline constexpr Param kAllParams[] = {Param::kTopology,   Param::kTeams,     Param::kDensity,
                                       Param::kBlockBytes, Param::kStaleness, Param::kCompressor};
// The ModeSpec field's name: "topology", "teams", "density", "block_bytes", "staleness",
// "compressor".
std::string_view ParamName(Param p);

// The values the scheduler fills in for the parameters a mode takes and a spec leaves unset.
struct ParamDefaults {
  std::string_view topology = "ring";
  int32_t teams = 1;
  double density = 0.01;
  int64_t block_bytes = int64_t{1} << 20;
  int32_t staleness = 4;  // a ps_async worker more than 4 iterations ahead waits
  std::string_view compressor = "minmax_uint8";
};

// The compressors a mode accepts.
enum class Compressors : uint8_t {
  kNone,     // the mode takes no compressor
  kWorkers,  // the workers' (algorithms/compression): minmax_uint8, sign, fp16, bf16,
             // qsgd[:LEVELS] (1..127), topk[:DENSITY] ((0, 1])
  kServers,  // the shards': minmax_uint8, sign
};

// What a mode's plan carries besides the ring and the shard map.
enum class PlanCarries : uint8_t {
  kNothing,
  kPeers,  // each rank's peers of the iteration (plan/topology.h)
  kTeams,  // the SparDL teams (plan/topology.h, Teams)
};

// How the shards apply a mode's pushes (kNone: the shards do not serve the mode).
enum class ServerEngine : uint8_t {
  kNone,
  kSync,              // a round completes when all M pushes arrived
  kAsync,             // each push applied at once, bounded staleness
  kErrorCompensated,  // compressed pushes summed, the sum compressed with server-side feedback
};

// Training state a mode carries from one iteration to the next: what a checkpoint saves and a
// mode switch hands over (DESIGN.md, "State, checkpoints and resume").
enum class State : uint8_t {
  kParameters,         // the model
  kOptimizerSlots,     // momentum, Adam moments
  kErrorFeedback,      // compression residuals (sender delta; reducer or server epsilon)
  kSparseResiduals,    // top-k residuals: gradient not delivered yet
  kBsagState,          // SparDL B-SAG's extra top-k state per bucket
  kOwnReplica,         // the parameters differ between workers (decentralized averaging)
  kNeighbourReplicas,  // D_LP_S: this worker's copies of its neighbours' models
  kClocks,             // parameter-server versions and rounds
  kFusionTuner,        // DeAR's fusion-threshold tuner observations
};
using StateSet = EnumSet<State>;

struct ModeInfo {
  std::string_view name;
  std::string_view summary;  // one line: what happens each iteration
  RunsOn runs_on = RunsOn::kWorkers;
  bool needs_communicator = false;  // the workers' communicator (collectives among workers)
  bool needs_servers = false;       // parameter-server shards (servers >= 1)
  EnumSet<Param> params;            // the ModeSpec parameters that apply
  ParamDefaults defaults;
  Compressors compressors = Compressors::kNone;
  bool floating_only = false;  // averages, quantises or optimizes: floating-point tensors only
  PlanCarries plan_carries = PlanCarries::kNothing;
  bool fixed_peers = false;  // keeps replicas of its peers, so they must not change: ring only
  ServerEngine server_engine = ServerEngine::kNone;
  // Goes on when a worker dies (its shards' staleness bound ignores dead workers); every other
  // mode exchanges with, or waits for, all workers, so a death fails a job that runs it.
  bool survives_worker_loss = false;
  // Elastic jobs (JobSpec.elastic): the mode goes on at P-1 after a worker's death: the
  // survivors roll back to their last in-memory commit and rebuild the executor for the live
  // workers (worker/session.h, docs/elastic.md). A mode without it (and without
  // survives_worker_loss) would fail an elastic job too; every mode has one of them.
  bool shrinks = false;
  // Shrinks, but does not grow past its `workers` while it runs (ps_sync and ps_ec: a round
  // sums the pushes of the workers the job started with; server/engine.h).
  bool takes_no_newcomer = false;
  StateSet worker_state;  // held by each worker
  StateSet server_state;  // held by the shards

  bool Takes(Param p) const { return params.contains(p); }
};

// Every mode, in DESIGN.md's order.
std::span<const ModeInfo> Modes();

// The mode named `name`; nullptr when there is none.
const ModeInfo* FindMode(std::string_view name);

// The mode named `name`; INVALID_ARGUMENT "unknown mode 'NAME'; known modes: ..." otherwise.
absl::StatusOr<const ModeInfo*> LookUpMode(std::string_view name);

// "allreduce, dear, lp, ...": every mode's name.
std::string ModeNameList();

// The names of the modes that take `p`, in table order.
std::vector<std::string_view> ModesTaking(Param p);

// OK when `mode` accepts `compressor`; INVALID_ARGUMENT naming the ones it accepts otherwise
// (a mode that takes no compressor accepts none).
absl::Status CheckCompressor(const ModeInfo& mode, std::string_view compressor);

// The mode the shards run with `engine`; nullptr for kNone.
const ModeInfo* ModeServedBy(ServerEngine engine);

// "a, b and c": names joined for a sentence.
std::string JoinForSentence(const std::vector<std::string_view>& names);

}  // namespace herd::plan
