#pragma once
// What every executor's ExportState / ImportState is made of (worker/executor.h): per-tensor
// state named "<kind>/<tensor>" and written by element range of the tensor, whatever buffers
// the executor keeps it in (fusion buckets, a flat model), and read back by the rule of its
// kind (docs/checkpoint.md, "What each mode saves and how it reshards").
//
// Imports are two-phase so that a failed import leaves the executor as it was: each part
// reads everything into a copy and returns the step that installs it (ImportStep); the
// executor runs the steps only once every part has read without error.

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/state.h"
#include "checkpoint/state_source.h"
#include "worker/executor.h"

namespace herd::worker {

class FusedBuckets;

// How a kind of state reshards when the importing run has another worker count (at the same
// count every rule reads the worker's own state, so a resume is bit for bit).
enum class Reshard {
  kReplicated,  // every worker holds the same values: worker 0's (any holder's) copy
  kMean,        // error-feedback residuals: the mean over the old workers (mass conserved)
  kAverage,     // decentralized models and their optimizer state: the old workers' average
  kSum,         // state the old workers partitioned between them (clps's reducer residual,
                // each element on its owner): the sum, i.e. every element's one holder's value
};

// "<kind>/<tensor>".
std::string StateName(std::string_view kind, std::string_view tensor);

// This worker's position in the importing run.
struct ImportWhere {
  int rank = 0;
  int world = 1;
};
// The executor's: its rank, and the job's worker count (the plan's, else the communicator's).
ImportWhere WhereOf(const ExecutorContext& context);

// Reads `name` (`out.size()` elements from 0) by `rule`. false (out unchanged) when no worker
// of `from` holds it; errors as StateSource::Read.
absl::StatusOr<bool> ReadState(const checkpoint::StateSource& from, std::string_view name,
                               Reshard rule, ImportWhere where, std::span<float> out);
// A value: this worker's own at the same worker count, else worker 0's (the first holder's).
std::optional<std::string> ReadValue(const checkpoint::StateSource& from, std::string_view key,
                                     ImportWhere where);
std::optional<int64_t> ReadIntValue(const checkpoint::StateSource& from, std::string_view key,
                                    ImportWhere where);

// Installs what an import read. Run only after every part of an import has read.
using ImportStep = std::function<void()>;
absl::Status RunAll(std::vector<absl::StatusOr<ImportStep>> steps);
// One step that installs all of `steps`, or the first error.
absl::StatusOr<ImportStep> Combine(std::vector<absl::StatusOr<ImportStep>> steps);

// Where each tensor's values sit in a set of buffers (by tensor, forward order).
struct TensorPlace {
  int buffer = 0;
  size_t offset = 0;
};
std::vector<TensorPlace> PlacesIn(const FusedBuckets& buckets, size_t tensors);
std::vector<TensorPlace> FlatPlaces(const std::vector<ModelTensor>& tensors);

// Exports "<kind>/<t><suffix>" of every tensor from `buffers` laid out by `places`.
void ExportPlaced(checkpoint::ProcessState& out, std::string_view kind,
                  const std::vector<ModelTensor>& tensors, const std::vector<TensorPlace>& places,
                  const std::vector<std::vector<float>>& buffers, std::string_view suffix = "");
// Reads "<kind>/<t><suffix>" of every tensor that `from` holds into a copy of `buffers` (a
// tensor it does not hold keeps its current values) and returns the step that copies it in
// (into the same memory: pointers to the buffers stay valid).
absl::StatusOr<ImportStep> ImportPlaced(const checkpoint::StateSource& from, std::string_view kind,
                                        Reshard rule, ImportWhere where,
                                        const std::vector<ModelTensor>& tensors,
                                        const std::vector<TensorPlace>& places,
                                        std::vector<std::vector<float>>* buffers,
                                        std::string_view suffix = "");

// A mode switch in memory (worker/session.cc): the old executor is flushed and exports its
// state as worker `rank`'s; the executor that replaces it imports it before its first
// iteration, as if resuming at the same worker count `world`.
absl::StatusOr<checkpoint::ProcessState> TakeExecutorState(Executor& old, int rank);
absl::Status GiveExecutorState(Executor& next, checkpoint::ProcessState state, int world);

// The session's part: the parameters, "param/<t>". Decentralized modes mark their export
// with the value kPerRankModels, and their parameters import by kAverage; every other mode's
// by kReplicated. Errors leave all unchanged. A tensor `from` does not hold keeps its values
// with kKeep (a handover in memory from an executor that holds only some), and is DATA_LOSS
// naming it with kRefuse (a checkpoint resume: a model silently left at its initial values
// would train on from scratch while reporting a resume).
inline constexpr std::string_view kPerRankModels = "models_per_rank";
enum class MissingParams { kKeep, kRefuse };
void ExportParams(checkpoint::ProcessState& out, const std::vector<ModelTensor>& tensors);
absl::Status ImportParams(const checkpoint::StateSource& from, ImportWhere where,
                          const std::vector<ModelTensor>& tensors,
                          MissingParams missing = MissingParams::kKeep);

}  // namespace herd::worker
