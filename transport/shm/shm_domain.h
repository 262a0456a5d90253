#pragma once
// The shared-memory domain of a communicator's ranks on one host: one segment in /dev/shm that
// every member maps, in which the collectives of algorithms/collectives/shm_*.cc stage their
// data and signal each other with counters and futex waits (no tag matching, no FIFO).
//
// Layout of the segment (all offsets 4 KiB aligned, see shm_domain.cc):
//   header        magic, version, geometry, the attach count
//   control x G   per member: state (attached / aborted / closed), pid, host identity, the
//                 reason of an abort
//   lane x L      per lane: the key of the operation that holds it, a futex word, and per member
//                 three counters and a doorbell (each on its own cache line): steps copied in,
//                 reduced, done
//   stages        per lane and member: K stages of stage_bytes, where the member copies its part
//                 of a pipeline step; peers read it from there directly
//
// Naming and cleanup. The lowest member (the leader) creates /dev/shm/herd-shm-<pidns>-<pid>-
// <nonce> (its pid namespace, its pid, a nonce the discovery exchanged: unique per communicator)
// with O_EXCL, the others open it, and once all G have attached the leader unlinks the name:
// from then on the memory lives exactly as long as some member maps it, and no crash can leave
// it behind. A leader that dies between creating and unlinking leaves a name whose pid is dead;
// the next leader on the host removes such names (RemoveStaleSegments) before it creates its own.
//
// Lanes. An operation (the caller's key: kind, tag and how many times this kind and tag ran on
// the communicator) maps to lane hash(key) % L. The first member to arrive claims the free lane
// (resets its counters, then publishes the key); the others join when they see the key; the last
// member to leave frees it. Two concurrent operations of one lane run one after the other, in
// the order of the claims, which every member sees alike, so concurrent operations on one
// communicator (DeAR's reduce-scatter and all-gather threads) never deadlock.
//
// Waiting. A waiter spins briefly (2 us when the host has more members than cores), then sleeps
// on the doorbell of the member it waits for (a futex word per member and lane), at most 10 ms
// at a time. Every publish rings the publisher's doorbell and wakes its sleepers when there are
// any, so a publish wakes only the members waiting for that member, not the whole host. Between
// sleeps it checks, in this order: its predicate, the members' published states (aborted with a
// reason / closed), its own communicator's status, and (at most every 2 ms) the members' pidfds: a
// member that died mid-operation is named within about 10 ms by every member that waits on
// anything.
//
// Thread safety: Enter, Abort and the LaneOps of different lanes may be used from several threads
// at once. One LaneOp belongs to one thread.

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/deadline.h"
#include "transport/communicator.h"

namespace herd::transport::shm {

struct DomainConfig {
  // Operations that can run at once without waiting for one another (DeAR runs two).
  int lanes = 4;
  // Pipeline depth: steps a member may copy in ahead of the slowest. 8 against 4: 16-64 MiB
  // all-reduces 15-20 % faster at 4 ranks on 2 cores (a rank that runs does more before it
  // waits).
  int stages = 8;
  // One member's share of one pipeline step. 256 KiB: at 4 ranks on 2 cores, 128 KiB took
  // 1.7-2.1x as long for 16-64 MiB all-reduces (more steps, each a chance to sleep), 1 MiB no
  // less than 256 KiB (docs/BENCHMARKS.md, "stage geometry").
  size_t stage_bytes = size_t{256} << 10;
  // The defaults, overridden by HERD_SHM_LANES, HERD_SHM_STAGES, HERD_SHM_STAGE_BYTES (the
  // leader's environment counts: the others read the geometry from the segment). Bad values
  // are INVALID_ARGUMENT naming the variable.
  static absl::StatusOr<DomainConfig> FromEnvironment();
  // Segment bytes for `members` members (header, control blocks, lanes, stages).
  size_t SegmentBytes(int members) const;
};

struct Member {
  int rank = 0;     // in the parent communicator
  int64_t pid = 0;  // the process (0: not known)
};

struct JoinOptions {
  Communicator* comm = nullptr;  // the parent: its status is checked while waiting
  std::vector<Member> members;   // this host's ranks in local order (the leader first)
  int index = 0;                 // this rank's position in `members`
  std::string identity;          // this rank's full host identity, checked against the others'
  uint64_t nonce = 0;            // the leader's nonce (the same on every member)
  DomainConfig config;           // used by the leader; the others take the segment's
  // What the parent communicator knows of a member's liveness beyond its process (a loopback
  // fabric's killed ranks: threads share the process); may be empty.
  std::function<absl::Status(int local)> peer_status;
};

class Domain;
struct Header;
struct Control;
struct LaneHeader;

// One operation's hold on a lane, from Domain::Enter to Leave. Counters start at 0 for every
// operation and only grow.
class LaneOp {
 public:
  enum Counter : int { kIn = 0, kReduced = 1, kDone = 2 };

  LaneOp() = default;
  LaneOp(LaneOp&& other) noexcept { *this = std::move(other); }
  LaneOp& operator=(LaneOp&& other) noexcept;
  ~LaneOp();  // leaves the lane if Leave was not called

  bool active() const { return domain_ != nullptr; }
  int lane() const { return lane_; }
  // Stage `s` (< stages) of member `local`: stage_bytes() bytes, 4 KiB aligned.
  std::byte* stage(int local, int s) const;

  // This member's counter: stored with release order, then the lane's waiters are woken.
  void Publish(Counter c, uint64_t value);
  uint64_t Get(int local, Counter c) const;  // acquire
  // The first member whose counter `c` is below `value`, or -1 when all are at least there.
  int Lagging(Counter c, uint64_t value) const;

  // Waits until `lagging()` returns -1 (it returns the member being waited for otherwise, named
  // in a deadline error). Errors, each prefixed with `what`: UNAVAILABLE naming the rank that
  // died, aborted (with its reason) or closed its communicator; this rank's communicator's
  // abort status; DEADLINE_EXCEEDED naming the member waited for.
  absl::Status Wait(absl::FunctionRef<int()> lagging, Deadline deadline, std::string_view what);
  absl::Status WaitAll(Counter c, uint64_t value, Deadline deadline, std::string_view what) {
    return Wait([&] { return Lagging(c, value); }, deadline, what);
  }

  // This member is done with the lane: its stages may be reused by the next operation once every
  // member has left.
  void Leave();

 private:
  friend class Domain;
  Domain* domain_ = nullptr;
  int lane_ = -1;
};

class Domain {
 public:
  // Creates (leader) or opens the segment, waits until every member attached, checks their host
  // identities, and opens a pidfd per peer. Errors: FAILED_PRECONDITION when /dev/shm cannot be
  // used (names the call and errno), UNAVAILABLE naming a member that died, DEADLINE_EXCEEDED
  // naming the members that did not attach.
  static absl::StatusOr<std::unique_ptr<Domain>> Join(const JoinOptions& options,
                                                      Deadline deadline);
  // Marks this member closed (a peer still waiting on it fails, naming it), wakes every waiter,
  // unmaps; the leader unlinks the name if it had not yet.
  ~Domain();

  int size() const { return size_; }
  int index() const { return index_; }
  int rank_of(int local) const { return members_[local].rank; }
  int lanes() const { return lanes_; }
  int stages() const { return stages_; }
  size_t stage_bytes() const { return stage_bytes_; }
  size_t segment_bytes() const { return bytes_; }
  const std::string& name() const { return name_; }  // "/herd-shm-..."
  // More members than cores this process may run on: waiters sleep at once instead of spinning.
  bool oversubscribed() const { return oversubscribed_; }

  // How many times an operation of (kind, id) started on this domain before: the third part of
  // an operation key, the same on every member since they run the same operations in order.
  uint64_t NextInstance(uint8_t kind, uint32_t id);
  // The key of an operation: nonzero, unique per (kind, id, instance).
  static uint64_t Key(uint8_t kind, uint32_t id, uint64_t instance);

  // Claims or joins the lane of `key` (waiting while another operation holds it). `signature`
  // sums up the operation's arguments (count, dtype, ...): a member that joins with another
  // signature than the claimer's fails with INVALID_ARGUMENT naming the claimer, since the two
  // would read each other's stages with different layouts. Errors otherwise as LaneOp::Wait's.
  absl::StatusOr<LaneOp> Enter(uint64_t key, uint64_t signature, Deadline deadline,
                               std::string_view what);

  // Publishes this member's failure (its peers fail with UNAVAILABLE "rank k aborted its
  // communicator: <why>") and wakes every waiter. The first reason stays.
  void Abort(const absl::Status& why);

  // Removes /dev/shm/herd-shm-<this pid namespace>-<pid>-* names whose pid is dead; the number
  // removed. Called by every leader before it creates a segment; public for tests.
  static int RemoveStaleSegments();
  // The /dev/shm prefix of this process's pid namespace: "herd-shm-<pidns>-".
  static std::string SegmentPrefix();

 private:
  friend class LaneOp;
  Domain() = default;

  absl::Status Attach(const JoinOptions& o, Deadline deadline);
  // The predicate-free part of every wait: peers' states, own communicator, pidfds. OK or the
  // error that ends the wait.
  absl::Status CheckPeers(bool poll_pids);
  void WakeAll();
  void Sleep(std::atomic<uint32_t>* word, uint32_t seen, std::atomic<uint32_t>* sleepers,
             Deadline deadline);
  absl::Status WaitWord(absl::FunctionRef<int()> lagging, std::atomic<uint32_t>* word,
                        std::atomic<uint32_t>* sleepers, Deadline deadline, std::string_view what);
  // As WaitWord, sleeping on the word of the member `lagging` names (`word_of(member)`: the
  // futex word and its sleeper count).
  using WordOf = absl::FunctionRef<std::pair<std::atomic<uint32_t>*, std::atomic<uint32_t>*>(int)>;
  absl::Status WaitOn(absl::FunctionRef<int()> lagging, WordOf word_of, Deadline deadline,
                      std::string_view what);
  void Bump(std::atomic<uint32_t>* word, std::atomic<uint32_t>* sleepers);

  // Pointers into the mapping (shm_domain.cc defines the structures).
  Header* header() const;
  Control* control(int local) const;
  LaneHeader* lane(int l) const;
  std::atomic<uint64_t>* counter(int l, int local, int c) const;
  // Member `local`'s doorbell in lane l: the futex word, followed by its sleeper count.
  std::atomic<uint32_t>* bell(int l, int local) const;

  Communicator* comm_ = nullptr;
  std::function<absl::Status(int local)> peer_status_;
  std::vector<Member> members_;
  int size_ = 0;
  int index_ = 0;
  int lanes_ = 0;
  int stages_ = 0;
  size_t stage_bytes_ = 0;
  size_t bytes_ = 0;
  std::string name_;
  bool leader_ = false;
  bool unlinked_ = false;
  bool oversubscribed_ = false;
  std::byte* base_ = nullptr;
  size_t lane_offset_ = 0, lane_stride_ = 0, stage_offset_ = 0;

  std::vector<int> pidfds_;            // per member, -1 for self / unwatched
  std::vector<uint64_t> start_times_;  // per member, for the /proc fallback when pidfds fail
  std::atomic<int64_t> next_pid_check_ns_{0};

  std::mutex mu_;
  std::unordered_map<uint64_t, uint64_t> instances_;  // (kind << 32 | id) -> count
};

}  // namespace herd::transport::shm
