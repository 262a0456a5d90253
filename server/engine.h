#pragma once
// An aggregation engine: the state of one shard's keys and the rules of its mode. No gRPC; the
// service (server/service.cc) validates nothing the engine does not and maps its absl errors
// to gRPC codes one to one.
//
//   ps_sync  (SyncEngine):  round r of a key completes when all M workers pushed it; the mean
//                           (or sum) of the gradients goes through the optimizer, the version
//                           becomes r + 1 and pulls waiting for it are answered.
//   ps_async (AsyncEngine): each push is applied at once (optimizer step, version + 1). A
//                           worker's clock on a key is the number of its pushes; a push at
//                           clock c waits while c > (slowest live worker's clock) + s.
//   ps_ec    (EcEngine):    like ps_sync, but pushes are compressed gradients; the completed
//                           round's sum plus the server residual epsilon is compressed, the
//                           new epsilon kept, and pulls get the compressed sum (C_LP_S).
//
// Elastic jobs (ShardConfig::elastic): a ps_sync or ps_ec round completes once every *live*
// worker pushed it (SetLiveWorkers); ps_sync steps with the mean of the pushes it took, ps_ec
// scales their sum to M pushes' worth (the workers divide by M). A worker back in its slot
// (the plans name it live again after it was dead) counts in a key's rounds only from the
// round a live worker announced it in (PushArgs::joiners), or from its own first push of the
// key's open round, whichever comes first; its push of a round completed without it is
// refused (docs/elastic.md, "ps_sync and ps_ec").
//
// Errors (state unchanged on every one): NOT_FOUND (other job, worker not in the job, key not
// of this job or not on this shard), INVALID_ARGUMENT (wrong length, dtype, undecodable
// payload, a non-finite value, a round whose result would be non-finite), FAILED_PRECONDITION
// (key not initialised, round already completed or not yet open), ALREADY_EXISTS (duplicate
// push), DEADLINE_EXCEEDED (a wait ran out), UNAVAILABLE (shut down, or the state cannot be
// written now: a full or broken disk; pushes are refused until it can, pulls still served).
//
// A round is computed beside the key's state (NextState) and only swapped in once it is
// finite and, when the durability policy writes it, written: nothing a pull can see is ever
// non-finite or missing from the disk.
//
// Thread-safe: one mutex per key; calls on different keys never wait for each other.

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <prometheus/counter.h>

#include "absl/status/statusor.h"
#include "checkpoint/state.h"
#include "checkpoint/state_source.h"
#include "common/deadline.h"
#include "server/key_record.h"
#include "server/shard_config.h"
#include "server/shard_extents.h"  // ShardProcess

namespace herd::server {

struct PushArgs {
  std::string_view job;
  int worker = 0;
  KeyId key;
  int64_t round = 0;
  std::string_view data;
  std::string_view dtype;  // "" or "fp32"
  double learning_rate =
      0;  // > 0: this push's learning rate (PushChunk.learning_rate); 0: the job's
  // ps_sync / ps_ec: workers back in their slot that the key's rounds count from this push's
  // round on (PushChunk.joiners: the live worker that handed them its state announces them).
  std::vector<int> joiners = {};
  // ps_async: the job's iteration of this push (PushChunk.iteration), if given.
  std::optional<int64_t> iteration = std::nullopt;
};

struct Pulled {
  int64_t version = 0;
  std::string data;  // fp32 parameters, or the compressed sum (ps_ec)
};

struct EngineStats {
  int keys = 0;
  int keys_initialized = 0;
  int64_t parameter_bytes = 0;
  int64_t pushes = 0, pulls = 0, rejected = 0, rounds_completed = 0, durable_writes = 0;
  int64_t min_version = 0, max_version = 0;
};

class Engine {
 public:
  // `writer` may be null (nothing durable; tests) and must outlive the engine.
  static std::unique_ptr<Engine> Create(ShardConfig config, KeyWriter* writer);
  virtual ~Engine() = default;

  const ShardConfig& config() const { return config_; }

  // Sets a key's initial parameters (fp32 bytes). Returns true when it did, false when the key
  // already had a value (which is kept).
  absl::StatusOr<bool> Init(std::string_view job, KeyId key, std::string_view values);
  // Puts back a key's state from the store (before serving).
  absl::Status Restore(const KeyRecord& record);

  // Accepts one push. ps_async may wait (staleness) until `deadline`.
  absl::Status Push(const PushArgs& args, Deadline deadline);
  // Waits until the key's version exceeds `round` (ps_sync / ps_ec: the round completed and,
  // under every-round, is on disk).
  absl::Status WaitRound(KeyId key, int64_t round, Deadline deadline);
  // ps_async: after a worker pushed clock `pushed_clock` of `key`, waits until the
  // parameters it reads next hold every live worker's updates up to clock pushed_clock - s
  // (stale-synchronous parallel; with s = 0 the read is synchronous). Other modes: at once.
  virtual absl::Status WaitReadable(KeyId /*key*/, int64_t /*pushed_clock*/,
                                    Deadline /*deadline*/) {
    return absl::OkStatus();
  }
  // The key's state once its version is at least `min_version`.
  absl::StatusOr<Pulled> Pull(std::string_view job, int worker, KeyId key, int64_t min_version,
                              Deadline deadline);

  // The keys of this shard, in order.
  std::vector<KeyId> Keys() const;
  // Live workers (from the scheduler's plan); ps_async's bound ignores the others, and an
  // elastic job's ps_sync and ps_ec rounds complete without them (a round that waited only for a
  // worker that died completes here). `nodes[i]`, when given, is the node id of the process
  // holding ranks[i] (Plan.workers): a slot whose process changed is a return too.
  void SetLiveWorkers(const std::vector<int>& ranks, const std::vector<uint64_t>& nodes = {});
  // Writes every key now (checkpoint). Returns the number of keys written.
  absl::StatusOr<int> WriteAll();
  // The lowest version on disk over this shard's keys (restored, or written by this engine);
  // nullopt while a key has none. The shard reports it to the scheduler, so a restart that
  // recovers less is caught (server/recovery_check.h).
  std::optional<int64_t> DurableVersion() const;
  // Wakes every waiter with UNAVAILABLE; later calls fail the same way.
  void Shutdown();

  // ---- Checkpoints (DESIGN.md "State, checkpoints and resume"; docs/checkpoint.md) ----
  //
  // The topology-free state of this shard's keys, as process ShardProcess(shard). Extents are
  // named after the tensors and placed at the key's elements of the tensor (never by key or
  // chunk, so another shard map finds them):
  //   param/<t>                             parameters (not ps_ec: its shards keep none)
  //   momentum/<t> | adam_m/<t>, adam_v/<t>  the optimizer's slots (optim::SlotKind)
  //   server_residual/<t>                   ps_ec's residual epsilon (units of the sum)
  // values (text):
  //   shard/mode, shard/workers, shard/version (the version the export is as of; ps_async:
  //   the highest key version), shard/keys (one line per key: "<tensor> <offset> <count>"),
  //   clocks/<t>@<offset>  (ps_async: the key's per-worker clocks, comma-separated),
  //   version/<t>@<offset> (each key's version; Adam's step count is the version).
  //
  // ps_sync and ps_ec: the state as of `version` (every key at version `version`, i.e. right
  // after round version-1 completed): keys already there are copied at once (under their
  // lock, while serving goes on), keys below it are copied by the round that takes them there,
  // waiting until `deadline` (DEADLINE_EXCEEDED names one). A key already past `version`:
  // FAILED_PRECONDITION (the cut was asked for too late; nothing is kept). ps_async: each key
  // as it is now, `version` unused (ps_async is not deterministic; nothing acknowledged is
  // lost). An uninitialised key: FAILED_PRECONDITION. One export at a time.
  absl::StatusOr<checkpoint::ProcessState> ExportState(int64_t version, Deadline deadline);

  // Before serving (no call in flight): takes this shard's keys' state from `from`, whichever
  // shard map and worker count exported it. The shard map and index are this engine's
  // config (build the engine with the new plan's ShardConfig): each key's element range is
  // read from the old shards that held it (found by their "shard/keys"), or, when no shard
  // holds it (a checkpoint of a collective mode), from the workers' replicated state (the
  // same names). Rules: parameters and optimizer slots as they are; versions: the old
  // version (ps_sync/ps_ec all keys, ps_async the version of the old key holding the first
  // element); ps_async's clocks restart at 0 (its export is no cut the workers share: the
  // workers' executors restart theirs too; staleness is relative, and the parameters hold
  // every acknowledged push); ps_ec's residual is scaled by
  // new workers / old workers, so the averaged update it adds is conserved. Keys become
  // initialised and are written as the durability policy writes rounds. Errors (the engine
  // then unchanged): NOT_FOUND for a key whose parameters nobody holds (ps_sync, ps_async),
  // FAILED_PRECONDITION for state of another length, DATA_LOSS for a "shard/keys" that does
  // not parse or old shards that cover a key's elements only in part.
  absl::Status ImportState(const checkpoint::StateSource& from);
  EngineStats Stats() const;

 protected:
  // Tensor `tensor`'s own learning-rate scale and weight decay (a torch parameter group's).
  optim::TensorHyper TensorHyperOf(int32_t tensor) const {
    if (tensor >= 0 && tensor < static_cast<int32_t>(config_.tensor_hyper.size())) {
      return config_.tensor_hyper[tensor];
    }
    return {};
  }
  // How often the scheduler's plans named worker `rank` live again after it was dead.
  int64_t ReturnsOf(int rank) const;

  struct KeyState {
    std::mutex mu;
    std::condition_variable cv;
    int64_t count = 0;
    bool initialized = false;
    int64_t version = 0;
    std::vector<float> params, slot0, slot1;
    // ps_sync / ps_ec: the round being collected, summed in rank order whatever order the
    // pushes arrive in (so a round's sum, and a run, is the same every time): `accum` holds
    // the sum of the pushes of ranks [0, folded) that pushed (in order); a push of a rank
    // beyond waits in `held` (its gradient, decoded) for its turn, or for the round's end, where
    // the rest is added in rank order (SumInRankOrder).
    std::vector<float> accum;
    std::vector<bool> pushed;
    int pushed_count = 0;
    int folded = 0;
    std::vector<std::vector<float>> held;
    double round_learning_rate = 0;  // ps_sync: the round's pushes' (0: the job's)
    // ps_sync / ps_ec, per worker: the return (ReturnsOf) after which the key's rounds count it (0
    // for a worker that never died). Behind ReturnsOf while a returned worker is not yet announced.
    std::vector<int64_t> counted_after_return;
    // ps_ec.
    std::vector<float> epsilon;
    std::string result;
    // ps_async.
    std::vector<int64_t> clocks;
    // ps_async, per worker: what its pushes' clocks add to be the key's (non-zero for a worker
    // back in its slot, whose new executor counts from 0) and the return they were set for.
    std::vector<int64_t> clock_base, based_on_return;
    // ps_async, per worker: its last push's clock minus its iteration (kNoOffset: no push with
    // an iteration yet). Live workers share one; a returner takes its iteration plus theirs.
    // Held in memory only: after a restart a returner falls back to the slowest live clock.
    static constexpr int64_t kNoOffset = INT64_MIN;
    std::vector<int64_t> iteration_offset;
    int64_t rounds_since_write = 0;
    // ps_ec never changes the parameters after InitKeys: once on disk they are not rewritten.
    bool params_durable = false;
    // The version of the key's last record on disk (-1: none yet).
    int64_t durable_version = -1;
    // ps_sync / ps_ec: the last round refused because its result was not finite (-1: none),
    // and why; whoever waits for that round hears it.
    int64_t refused_round = -1;
    absl::Status refused;
  };

  // A key's state after a round, built beside the current one; unset parts do not change.
  struct NextState {
    std::optional<std::vector<float>> params, slot0, slot1, epsilon;
    std::optional<std::string> result;
    std::optional<std::vector<int64_t>> clocks;
  };

  Engine(ShardConfig config, KeyWriter* writer);

  // ps_sync / ps_ec, with the key locked: takes worker `w`'s accepted push `grad` into the
  // round (added to accum when every lower rank that pushed is in it, held otherwise), and adds
  // any held push whose turn came.
  void TakeInRankOrderLocked(KeyState& ks, int w, std::span<const float> grad);
  // The round's sum: accum plus the held pushes and `last` (of worker `last_worker`, -1: none),
  // added in rank order. The key is unchanged.
  std::vector<float> SumInRankOrderLocked(const KeyState& ks, int last_worker,
                                          std::span<const float> last) const;
  // Empties the round (after it completed or was refused).
  void ClearRoundLocked(KeyState& ks);

  // The mode's push, with the key locked and the common checks done.
  virtual absl::Status PushLocked(KeyState& ks, const PushArgs& args,
                                  std::unique_lock<std::mutex>& lock, Deadline deadline) = 0;
  // The payload a pull returns, with the key locked.
  virtual std::string PullPayloadLocked(const KeyState& ks) const;
  // ps_sync / ps_ec: completes the key's open round with the pushes it holds (locked); see
  // OnLiveWorkersLocked. The default (ps_async, which has no rounds) does nothing.
  virtual absl::Status CompleteOpenRoundLocked(KeyState& /*ks*/, KeyId /*key*/) {
    return absl::OkStatus();
  }

  // ---- The rounds of an elastic job (ps_sync and ps_ec; docs/elastic.md) ----
  //
  // Whether the open round is complete once `worker` (-1: nobody new) has pushed it: every
  // worker pushed, or, in an elastic job, every live one (a push a dead worker made before it
  // died counts; it is not waited for).
  bool RoundCompleteWith(const KeyState& ks, int worker) const;
  // The checks of a round's push, in the order both engines need them: a push of a worker the
  // scheduler declared dead is refused (its round may complete without it, and a late push
  // must not enter another round), then CheckRound. A push made again (the client's resume
  // after a lost answer) that finds its first one in a round that, after a death, waits for
  // no one completes that round (a write that failed when the live workers changed is retried
  // here); the caller still returns the error and the client then pulls the result.
  absl::Status CheckRoundPushLocked(KeyState& ks, const PushArgs& args);
  // Elastic jobs: a push from a worker the shard believes dead, or announcing one as a joiner,
  // waits (ShardConfig::plan_wait, at most until `deadline`; the key unlocked meanwhile) for
  // the plan that names it live: a restarted worker's push may overtake the shard's watch of
  // the scheduler's plans. SetLiveWorkers wakes it. What it then finds is checked as usual.
  void AwaitPlanNamingLiveLocked(KeyState& ks, const PushArgs& args,
                                 std::unique_lock<std::mutex>& lock, Deadline deadline);
  // ps_sync / ps_ec: whether the key's rounds count worker `w` (live or not): not a worker
  // back in its slot that no push announced yet and that did not push the key's open round
  // itself.
  bool CountedLocked(const KeyState& ks, int w) const;
  // ps_sync / ps_ec, before the checks of a round's push: a worker back in its slot that the
  // key does not count yet pushing a round that completed without it cannot take part in it
  // (ps_ec: its model, stepped without that round's result, would leave the others'; ps_sync:
  // its iteration and its round would disagree, and its last push would be of a round nobody
  // else pushes): FAILED_PRECONDITION. (The protocol prevents it: its source announces it in a
  // round that waits for it.)
  absl::Status CheckReturnedPushLocked(const KeyState& ks, const PushArgs& args) const;
  // ps_sync / ps_ec, once the push is accepted into the open round: the key counts from this
  // round on the pusher (a worker back in its slot pushing the open round first) and every
  // live worker the push announces.
  void CountReturnedLocked(KeyState& ks, const PushArgs& args);
  // After the live workers changed, with the key locked: in an elastic job a round that waited
  // only for workers that died completes now (CompleteOpenRoundLocked), so the survivors
  // blocked in its pull go on without rerunning anything; then the key's waiters wake.
  void OnLiveWorkersLocked(KeyState& ks, KeyId key);

  // Makes `next` the key's state at version + 1: INVALID_ARGUMENT naming `who` (the pushes
  // that made the round) when a value is not finite, UNAVAILABLE when the durability policy
  // writes this round and the write fails; the key is unchanged on both. Wakes waiters.
  absl::Status CommitRoundLocked(KeyState& ks, KeyId key, NextState next, std::string_view who);
  // OK when the state can be written now (or nothing is written before a checkpoint).
  absl::Status Writable() const;
  absl::Status Usable() const;
  // The key's state: NOT_FOUND for another job or a key not on this shard.
  absl::StatusOr<KeyState*> Lookup(std::string_view job, KeyId key) const;
  bool LiveWorker(int rank) const;
  void Reject() { rejected_.fetch_add(1, std::memory_order_relaxed); }

  const ShardConfig config_;

 private:
  // A key's state as ExportState copies it.
  struct KeyCopy {
    int64_t version = 0;
    std::vector<float> params, slot0, slot1, epsilon;
    std::vector<int64_t> clocks;
  };
  // ExportState's capture of ps_sync / ps_ec keys at capture_version_ (engine_state.cc): by
  // ExportState for keys already there, by CommitRoundLocked for the others.
  void CaptureLocked(const KeyState& ks, KeyId key);
  checkpoint::ProcessState StateOf(const std::map<KeyId, KeyCopy>& copies, int64_t version) const;

  absl::Status CheckWorker(int worker) const;
  absl::Status WriteLocked(KeyState& ks, KeyId key);
  // Writes `view` (the state of `ks`, locked) and notes its version as on disk.
  absl::Status WriteView(KeyState& ks, KeyRecordView view);

  KeyWriter* writer_;
  std::map<KeyId, std::unique_ptr<KeyState>> keys_;  // this shard's keys; fixed after Create
  mutable std::mutex live_mu_;
  std::vector<bool> live_;
  // Per worker: how often the scheduler's plans named it live again after it was dead (a
  // worker restarted into an elastic job, back in its slot).
  std::vector<int64_t> returns_;
  // Per worker: the node id of the process the plans named in its slot last (0: not known).
  std::vector<uint64_t> node_of_;
  // SetLiveWorkers calls so far, and per worker the count at which a push's wait for the plan
  // naming it live ran out (-1: none): AwaitPlanNamingLiveLocked waits once per plan.
  int64_t live_changes_ = 0;
  std::vector<int64_t> waited_out_at_;
  // ps_ec: the (worker, return) announcements logged already (one line per return).
  std::vector<int64_t> announced_logged_;
  std::atomic<bool> shutdown_{false};
  std::atomic<int64_t> pushes_{0}, pulls_{0}, rejected_{0}, rounds_{0}, writes_{0};
  prometheus::Counter& rounds_metric_;  // herd_shard_rounds_total{mode} (docs/metrics.md)

  std::mutex export_mu_;                      // one ExportState at a time
  std::atomic<int64_t> capture_version_{-1};  // -1: no capture under way
  std::mutex capture_mu_;                     // after a key's mutex, never before
  std::condition_variable capture_cv_;
  std::map<KeyId, KeyCopy> captured_;
};

}  // namespace herd::server
