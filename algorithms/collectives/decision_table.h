#pragma once
// Algorithm::kAuto: which algorithm runs an operation, chosen per (operation, element size,
// vector bytes, ranks) from a table of measurements, as OpenMPI's tuned component does.
//
// The table is text, one rule a line (`#` starts a comment):
//
//   <op> <ranks> <hosts> <dtype bytes> <up to bytes | inf> <algorithm>[,<fallback>]
//   allreduce 4 1 4 8192 shm,oneshot
//   allreduce 4 1 4 inf shm,ring
//   allreduce 8 4 4 inf hier,ring
//
// (the five-field form of earlier tables, without <hosts>, means one host). `hosts` is the
// number of hosts the ranks are on (the communicator's host layout, topology.h). A call of
// `bytes` bytes (the whole vector: the all-gather's output, the reduce-scatter's input) takes
// the first rule of its group (op, ranks, hosts, dtype bytes) whose bound is >= bytes; a group
// without an `inf` rule extends its last rule. A call whose layout no group names uses the
// nearest group: first one of the same kind (one host, or several), then the nearest rank
// count (the smaller on a tie), the nearest host count, the nearest element size. An operation
// without rules runs its classic algorithm (ring; lp for broadcast and reduce).
//
// The rule's algorithm runs where it can: shm only with every rank on one host, hier only
// across hosts with some host of two or more ranks (reduce-scatter and all-gather: as many on
// every host), both only where the hosts' shared-memory segments work. Elsewhere the rule's
// fallback runs (a flat algorithm), else the classic one. `herd bench collectives --tune FILE`
// measures and writes such a file (with the fastest flat algorithm as fallback where shm or
// hier won); a table measured on this machine is compiled in (default_decision_table.cc).
//
// Every rank must use the same table: the pick decides which messages a rank sends, so ranks
// that picked differently would wait for each other until the deadline. The table comes from
// SetActiveDecisionTable, else the file named by $HERD_COLLECTIVES_TABLE (read once per
// process), else the compiled-in one.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "algorithms/collectives/options.h"

namespace herd::collectives {

enum class CollectiveOp : uint8_t { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce };
std::string_view CollectiveOpName(CollectiveOp op);  // "allreduce", "reduce_scatter", ...
absl::StatusOr<CollectiveOp> ParseCollectiveOp(std::string_view name);
// The algorithms run.h dispatches for `op` on host memory ("native" and "auto" excluded).
const std::vector<Algorithm>& HostAlgorithms(CollectiveOp op);
// The algorithm an operation runs when no rule names it: ring; lp for broadcast and reduce.
Algorithm ClassicAlgorithm(CollectiveOp op);

struct DecisionRule {
  CollectiveOp op = CollectiveOp::kAllReduce;
  int ranks = 2;
  size_t dtype_bytes = 4;
  size_t up_to_bytes = 0;  // kUnbounded: every larger size
  Algorithm algorithm = Algorithm::kRing;
  Algorithm fallback = Algorithm::kAuto;  // kAuto: none (the classic algorithm)
  int hosts = 1;
};
inline constexpr size_t kUnbounded = ~size_t{0};

// What decides whether shm and hier can run on a communicator (from its topology).
struct LayoutTraits {
  int ranks = 1;
  int hosts = 1;
  bool shm = false;     // every host of two or more ranks has a working segment
  bool uniform = true;  // the same number of ranks on every host
};
// Whether `a` can run `op` on that layout (shm, hier as above; every other algorithm: yes).
bool RunsOn(Algorithm a, CollectiveOp op, const LayoutTraits& layout);

class DecisionTable {
 public:
  DecisionTable() = default;
  // INVALID_ARGUMENT naming `source` and the line: an unknown op or algorithm, an algorithm the
  // op does not have, ranks < 2, an element size other than 1, 2, 4, 8, a bound of 0, or two
  // rules of one group with the same bound.
  static absl::StatusOr<DecisionTable> Parse(std::string_view text, std::string_view source);
  // Reads and parses a file (NOT_FOUND / INVALID_ARGUMENT naming the path).
  static absl::StatusOr<DecisionTable> Load(const std::string& path);

  // The text Parse reads back, groups sorted by (op, ranks, dtype bytes), bounds ascending.
  std::string Format() const;

  // The algorithm for one call (see the header comment); never kAuto. The first form assumes
  // one host where shm can run.
  Algorithm Choose(CollectiveOp op, size_t dtype_bytes, size_t bytes, int ranks) const;
  Algorithm Choose(CollectiveOp op, size_t dtype_bytes, size_t bytes,
                   const LayoutTraits& layout) const;

  // Replaces every rule of the groups that `rules` touch (op, ranks, hosts, dtype bytes) with
  // `rules`: how a tuning run for one rank count updates a file that holds others.
  void Merge(const std::vector<DecisionRule>& rules);

  const std::vector<DecisionRule>& rules() const { return rules_; }

 private:
  void Sort();
  std::vector<DecisionRule> rules_;
};

// The table measured on the project's reference machine (compiled in).
const DecisionTable& DefaultDecisionTable();
const char* DefaultDecisionTableText();

// The table kAuto consults now: SetActiveDecisionTable's, else $HERD_COLLECTIVES_TABLE's (an
// unreadable or invalid file is this error on every call, so a typo cannot silently fall back
// to other picks), else DefaultDecisionTable().
absl::StatusOr<std::shared_ptr<const DecisionTable>> ActiveDecisionTable();
// nullptr restores the environment / default choice. Thread-safe; calls in flight keep the
// table they started with.
void SetActiveDecisionTable(std::shared_ptr<const DecisionTable> table);

// What kAuto runs for this call: the active table's pick for the communicator's host layout
// (discovered on the first call, topology.h: collective), or kRing on a communicator whose
// memory is not host memory (the ring delegates to the backend's native op there). Errors:
// the table's (see ActiveDecisionTable), the discovery's; comm must be set.
absl::StatusOr<Algorithm> ResolveAuto(CollectiveOp op, const CommonOptions& options, size_t count);
// The active table's pick for `bytes` on a layout given directly (the hierarchical algorithms
// choose their inter-host step this way, on a layout of one rank per host).
absl::StatusOr<Algorithm> ResolveFor(CollectiveOp op, size_t dtype_bytes, size_t bytes,
                                     const LayoutTraits& layout);

}  // namespace herd::collectives
