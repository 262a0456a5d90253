// The worker's half of the mode registry: each mode name to the function that builds its
// executor. What a mode needs (a communicator, shards) comes from plan/modes.h; a new mode adds
// its registry entry there, its executor under worker/executors/ and one line here.
#include <functional>
#include <map>
#include <string>

#include "absl/strings/str_format.h"
#include "common/status.h"
#include "plan/modes.h"
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

using Builder = std::function<absl::StatusOr<std::unique_ptr<Executor>>(const ExecutorContext&)>;

const std::map<std::string, Builder, std::less<>>& Builders() {
  static const auto* builders = new std::map<std::string, Builder, std::less<>>{
      {"allreduce",
       [](const ExecutorContext& c) { return MakeWfbpExecutor(c, collectives::Algorithm::kAuto); }},
      {"lp",
       [](const ExecutorContext& c) {
         return MakeWfbpExecutor(c, collectives::Algorithm::kLinearPipeline);
       }},
      {"dear", MakeDearExecutor},
      {"sparse", MakeSparseExecutor},
      {"topk_allgather", MakeSparseExecutor},
      {"decentralized", MakeDecentralizedExecutor},
      {"decentralized_lp", MakeDecentralizedLpExecutor},
      {"clps", MakeClpsExecutor},
      {"ps_sync", MakePsExecutor},
      {"ps_async", MakePsExecutor},
      {"ps_ec", MakePsExecutor},
  };
  return *builders;
}

}  // namespace

std::vector<std::string> ExecutorModes() {
  std::vector<std::string> names;
  for (const auto& [name, builder] : Builders()) names.push_back(name);
  return names;
}

bool ModeUsesCommunicator(std::string_view mode) {
  const plan::ModeInfo* m = plan::FindMode(mode);
  return m != nullptr && m->needs_communicator;
}

absl::StatusOr<std::unique_ptr<Executor>> MakeExecutor(ExecutorContext context) {
  const std::string mode = context.plan.mode().mode();
  const plan::ModeInfo* info = plan::FindMode(mode);
  auto it = Builders().find(mode);
  if (info == nullptr || it == Builders().end()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("the worker runs no mode '%s'; it runs %s", mode, plan::ModeNameList()));
  }
  if (info->needs_communicator && context.comm == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "mode '%s' runs collectives among the workers but has no communicator", mode));
  }
  if (context.comm != nullptr && context.comm->size() > 1 && context.comm->rank() != context.rank &&
      info->needs_communicator) {
    return absl::InvalidArgumentError(
        absl::StrFormat("the communicator's rank %d is not the worker's rank %d",
                        context.comm->rank(), context.rank));
  }
  return it->second(context);
}

}  // namespace herd::worker
