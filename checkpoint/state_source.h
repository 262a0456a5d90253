#pragma once
// Where an importer reads training state from: a checkpoint on disk (the reader of
// checkpoint/), or, in memory, the states other executors or processes just exported (a mode
// switch, a rejoining worker). The importer asks by process and by name; the rules that turn
// another run's layout into this one's (DESIGN.md: replicated state as is, residual mass
// conserved, decentralized models averaged, shard extents re-mapped) are the helpers below,
// so every executor applies them the same way.

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "checkpoint/state.h"

namespace herd::checkpoint {

// The process names of the states in a checkpoint (its files, its manifest's `expected`), the
// same in every process that writes or reads one: "worker-3" for a worker's state,
// "shard-1" for a parameter-server shard's.
std::string WorkerProcess(int rank);
std::string ShardProcess(int shard);
// The key in the job's store by which `process` says it reached checkpoint `id`'s cut (a
// worker) or staged its copy there (a shard): "checkpoint/<id>/<process>"
// (docs/checkpoint.md, "Shards").
std::string CutKey(const std::string& id, const std::string& process);

class StateSource {
 public:
  virtual ~StateSource() = default;
  // How many workers the exporting run had (0 when it had none).
  virtual int workers() const = 0;
  // Whether process `process` holds any part of `name`.
  virtual bool Has(std::string_view process, std::string_view name) const = 0;
  // Elements [offset, offset + out.size()) of fp32 state `name` as `process` holds it.
  // NOT_FOUND when it holds none of it, OUT_OF_RANGE when the range is not covered,
  // FAILED_PRECONDITION when it is not fp32 or its total differs from `total`.
  virtual absl::Status Read(std::string_view process, std::string_view name, int64_t total,
                            int64_t offset, std::span<float> out) const = 0;
  // A value of `process` (checkpoint/state.h, ProcessState::values).
  virtual std::optional<std::string> Value(std::string_view process,
                                           std::string_view key) const = 0;
};

// A source over states held in memory.
class MemoryStateSource final : public StateSource {
 public:
  MemoryStateSource(std::vector<ProcessState> states, int workers);
  int workers() const override { return workers_; }
  bool Has(std::string_view process, std::string_view name) const override;
  absl::Status Read(std::string_view process, std::string_view name, int64_t total, int64_t offset,
                    std::span<float> out) const override;
  std::optional<std::string> Value(std::string_view process, std::string_view key) const override;

 private:
  const ProcessState* Find(std::string_view process) const;
  std::vector<ProcessState> states_;
  int workers_;
};

// The rules, for state of `total` elements read into `out` (elements [offset, ...)).
//
// Replicated state (parameters and optimizer slots of the synchronous modes): every worker
// holds the same values, so any worker's copy will do (worker 0's, else the first that has it).
// NOT_FOUND when no worker has it.
absl::Status ReadReplicated(const StateSource& from, std::string_view name, int64_t total,
                            int64_t offset, std::span<float> out);
// Per-worker state whose sum over the workers matters (error-feedback residuals): at the same
// worker count, rank `rank`'s own; at another, the mean over the old workers, so that every
// new worker's share of the averaged update is the old total (no gradient created or lost).
// NOT_FOUND when no worker has it.
absl::Status ReadOwnOrMean(const StateSource& from, std::string_view name, int64_t total,
                           int64_t offset, int rank, int world, std::span<float> out);
// Per-worker models (decentralized modes): at the same worker count, rank `rank`'s own; at
// another, the average of the old workers' models. NOT_FOUND when no worker has it.
absl::Status ReadOwnOrAverage(const StateSource& from, std::string_view name, int64_t total,
                              int64_t offset, int rank, int world, std::span<float> out);

// Adds `values` as an fp32 extent covering elements [offset, offset + values.size()) of a
// state of `total` elements.
void AddExtent(ProcessState& state, std::string name, int64_t total, int64_t offset,
               std::span<const float> values);

}  // namespace herd::checkpoint
