// The table of modes the worker runs: each mode name to the function that builds its executor.
// A new mode adds one entry here and its executor under worker/executors/.
#include <functional>
#include <map>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "worker/executor.h"
#include "worker/executors/clps_executor.h"
#include "worker/executors/dear_executor.h"
#include "worker/executors/decentralized_executor.h"
#include "worker/executors/decentralized_lp_executor.h"
#include "worker/executors/ps_executor.h"
#include "worker/executors/sparse_executor.h"
#include "worker/executors/wfbp_executor.h"

namespace herd::worker {
namespace {

struct ModeEntry {
  bool uses_communicator;
  std::function<absl::StatusOr<std::unique_ptr<Executor>>(const ExecutorContext&)> make;
};

const std::map<std::string, ModeEntry, std::less<>>& Modes() {
  static const auto* modes = new std::map<std::string, ModeEntry, std::less<>>{
      {"allreduce",
       {true,
        [](const ExecutorContext& c) {
          return MakeWfbpExecutor(c, collectives::Algorithm::kRing);
        }}},
      {"lp",
       {true,
        [](const ExecutorContext& c) {
          return MakeWfbpExecutor(c, collectives::Algorithm::kLinearPipeline);
        }}},
      {"dear", {true, MakeDearExecutor}},
      {"sparse", {true, MakeSparseExecutor}},
      {"topk_allgather", {true, MakeSparseExecutor}},
      {"decentralized", {true, MakeDecentralizedExecutor}},
      {"decentralized_lp", {true, MakeDecentralizedLpExecutor}},
      {"clps", {true, MakeClpsExecutor}},
      {"ps_sync", {false, MakePsExecutor}},
      {"ps_async", {false, MakePsExecutor}},
      {"ps_ec", {false, MakePsExecutor}},
  };
  return *modes;
}

}  // namespace

bool ModeUsesCommunicator(std::string_view mode) {
  auto it = Modes().find(mode);
  return it != Modes().end() && it->second.uses_communicator;
}

bool ModeUsesServers(std::string_view mode) { return mode.substr(0, 3) == "ps_"; }

absl::StatusOr<std::unique_ptr<Executor>> MakeExecutor(ExecutorContext context) {
  const std::string mode = context.plan.mode().mode();
  auto it = Modes().find(mode);
  if (it == Modes().end()) {
    std::vector<std::string> names;
    for (const auto& [name, entry] : Modes()) names.push_back(name);
    return absl::InvalidArgumentError(absl::StrFormat("the worker runs no mode '%s'; it runs %s",
                                                      mode, absl::StrJoin(names, ", ")));
  }
  if (it->second.uses_communicator && context.comm == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "mode '%s' runs collectives among the workers but has no communicator", mode));
  }
  if (context.comm != nullptr && context.comm->size() > 1 && context.comm->rank() != context.rank &&
      it->second.uses_communicator) {
    return absl::InvalidArgumentError(
        absl::StrFormat("the communicator's rank %d is not the worker's rank %d",
                        context.comm->rank(), context.rank));
  }
  return it->second.make(context);
}

}  // namespace herd::worker
