#pragma once
// The pipeline that every shared-memory collective runs in the host's segment
// (transport/shm/shm_domain.h). Internal to algorithms/collectives.
//
// A member's *region* is the part of the user buffer it owns in the operation (reduce-scatter:
// what it reduces; all-gather: what it contributes; broadcast: the root's whole vector), a list
// of byte ranges read as one concatenated run. The regions advance in pipeline steps; step t uses
// stage t % K of every member's K stages:
//
//   copy in   the member copies its part of step t from its buffer into its stage:
//               reduce-scatter, all-reduce, reduce: the piece [t c, (t+1) c) of every member d's
//               region, at offset d c of the stage (c = stage_bytes / G);
//               all-gather, broadcast (root), direct all-reduce: piece t of its own region (c =
//               stage_bytes);
//   reduce    member d reduces piece t of its region from all G stages in one pass (ReduceMany):
//               reduce-scatter: straight into its buffer; all-reduce, reduce: in place in its
//               stage; direct all-reduce: every member the whole piece, into its own buffer;
//   copy out  the member copies what it needs of step t from the stages into its buffer:
//               all-reduce (reduce: the root only): the reduced pieces of every member;
//               all-gather: the other members' pieces; broadcast: the root's piece.
//
// Counters (LaneOp: in, reduced, done per member): a member publishes after each task; a task
// waits only for what it reads (reduce: every member's in >= t+1; copy out: every reduced >= t+1,
// or the owners' in >= t+1; copy in: every member's done >= t+1-K before its stage is reused).
// A member does whichever of its tasks is ready, oldest step first, and copies in up to K steps
// ahead: with more members than cores, the member that runs does all it can before it sleeps.
//
// Every byte of the user buffer is read once from memory (copy in) and written once (reduce or
// copy out); the stages are small enough to stay in the cache between the copies (K G
// stage_bytes per lane).

#include <cstddef>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/deadline.h"
#include "common/dtype.h"
#include "common/reduce.h"
#include "transport/communicator.h"
#include "transport/shm/shm_domain.h"

namespace herd::collectives::internal {

// Byte ranges of a buffer read as one concatenated run.
struct Region {
  std::vector<std::pair<size_t, size_t>> ranges;  // (buffer offset, bytes), in run order
  std::vector<size_t> starts;                     // run offset of each range
  size_t bytes = 0;

  void Add(size_t offset, size_t length);
  // f(buffer offset, run offset, length) for every contiguous piece of run bytes [a, b).
  template <typename F>
  void ForEach(size_t a, size_t b, F&& f) const;
};

enum class ShmMode {
  kReduceScatter,    // each member's region reduced into its own buffer
  kAllGather,        // each member's region copied to every other member's buffer
  kAllReduce,        // reduced in the stages, copied out by every member
  kAllReduceDirect,  // every member reduces the whole vector (region 0 = the vector) itself
  kBroadcast,        // the root's region copied to every member
  kReduce,           // as kAllReduce, copied out by the root only
};

struct ShmPlan {
  ShmMode mode = ShmMode::kAllReduce;
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  std::byte* data = nullptr;
  std::vector<Region> regions;  // per member; kAllReduceDirect and kBroadcast use one entry
  int root = 0;                 // kBroadcast, kReduce: the member whose region counts
  int divide_by = 0;            // > 1 with op avg: divide each reduced piece by it
};

// Copies out of the stages go to the buffer with streaming (non-temporal) stores when the
// vector is at least this long: it will not be in the cache anyway, and such stores skip
// reading every line before writing it. $HERD_SHM_STREAM_BYTES (0: never), else the default
// measured on the reference machine (docs/collectives.md). Read once.
size_t ShmStreamBytes();

// Steps the plan takes on a domain with this geometry (the same on every member).
size_t ShmSteps(const ShmPlan& plan, const transport::shm::Domain& domain);

// Runs the plan's steps on `op`, a lane operation of its own (its counters start at 0; the last
// step's "done" is not published: the next operation of the lane waits for every member to
// leave). Errors as LaneOp::Wait's, prefixed with `what`; the caller aborts.
absl::Status RunShmPlan(transport::shm::LaneOp& op, const transport::shm::Domain& domain,
                        const ShmPlan& plan, Deadline deadline, std::string_view what);

// Region d = chunk d of `count` elements over `parts` (ChunkBegin / ChunkSize), in bytes.
std::vector<Region> ChunkRegions(size_t count, int parts, size_t esize);
Region WholeRegion(size_t count, size_t esize);

// Runs `plan` as a lane operation of its own, keyed by (kind + 64 phase, tag, how many such ran
// before): enter the lane, run, leave. A hierarchical collective runs its phases as separate
// operations (phase 0, 1), so no lane is held while it talks to other hosts. On failure
// ShmFail's the error.
absl::Status RunShmOperation(transport::Communicator& comm, transport::shm::Domain& domain,
                             transport::OpKind kind, uint32_t tag, int phase, const ShmPlan& plan,
                             Deadline deadline, std::string_view what);
// Publishes `error` to the host's other members (they fail naming this rank), aborts `comm`,
// returns `error`.
absl::Status ShmFail(transport::Communicator& comm, transport::shm::Domain* domain,
                     absl::Status error);

template <typename F>
void Region::ForEach(size_t a, size_t b, F&& f) const {
  if (a >= b) return;
  // The range holding run offset a: the last start <= a.
  size_t i = 0, lo = 0, hi = starts.size();
  while (hi - lo > 1) {
    const size_t mid = (lo + hi) / 2;
    (starts[mid] <= a ? lo : hi) = mid;
  }
  for (i = lo; i < ranges.size() && starts[i] < b; ++i) {
    const size_t from = std::max(a, starts[i]);
    const size_t to = std::min(b, starts[i] + ranges[i].second);
    if (from < to) f(ranges[i].first + (from - starts[i]), from, to - from);
  }
}

}  // namespace herd::collectives::internal
