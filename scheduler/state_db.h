#pragma once
// The scheduler's durable state in RocksDB (one database under --state DIR):
//   job/<name>        -> herd.v1.JobStatus (spec, membership, epoch, mode schedule, progress)
//   kv/<job>/<key>    -> a bootstrap-store value of the job
//   meta/next_node_id -> the next node id to hand out (decimal)
//   meta/state_seq    -> the number of the newest write (decimal; state_sequence.h): every
//                        write batch stores it
//   meta/lost         -> set when a process proved that acknowledged writes are missing: why
//                        (the refusal stands across restarts until --accept-data-loss)
// Writes go through the write-ahead log, so a scheduler killed with SIGKILL loses nothing it
// acknowledged; `sync` writes also survive a machine crash. Opening, damage and disk faults
// follow storage/database.h: a damaged log is DATA_LOSS at open, a failed write UNAVAILABLE
// naming the cause until the disk is back (nothing in memory changes on a failed write: the
// core commits to memory only after the write). Not thread-safe: the Scheduler serialises
// calls under its mutex.

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "herd/v1/scheduler.pb.h"
#include "scheduler/state_sequence.h"
#include "storage/database.h"

namespace herd::scheduler {

class StateDb {
 public:
  struct Options {
    bool accept_data_loss = false;                     // --accept-data-loss
    std::shared_ptr<rocksdb::FileSystem> file_system;  // null: the local disk (tests: faults)
  };
  // Opens (creating if missing) the database in `dir`. FAILED_PRECONDITION when another
  // process holds it (RocksDB's lock), with the directory named; DATA_LOSS when damaged.
  static absl::StatusOr<std::unique_ptr<StateDb>> Open(const std::string& dir, Options options);
  static absl::StatusOr<std::unique_ptr<StateDb>> Open(const std::string& dir) {
    return Open(dir, Options{});
  }
  ~StateDb();

  struct Contents {
    // By the name in the record's key (the caller checks it against the spec's).
    std::map<std::string, herd::v1::JobStatus> jobs;
    std::map<std::string, std::map<std::string, std::string>> kv;  // job -> key -> value
    uint64_t next_node_id = 0;  // 0: the record is missing or does not parse
    // Job records that do not parse: key -> why. They never stop a load; the caller sets them
    // aside (SetAside) and says so.
    std::map<std::string, std::string> unreadable;
    // meta/lost: why an earlier start refused this state ("" when it did not).
    std::string lost;
  };
  // Reads everything. Only a failure to read the database itself is an error.
  absl::StatusOr<Contents> Load();

  // Moves the record `key` (of a job that cannot be served) to `bad/<key>`, where an operator
  // can inspect it, in one synced batch; the job's name becomes free.
  absl::Status SetAside(const std::string& key);
  static std::string JobKey(std::string_view job);

  // Writes the job (and, when non-zero, the node-id counter) in one atomic batch.
  absl::Status PutJob(const herd::v1::JobStatus& job, uint64_t next_node_id, bool sync);
  absl::Status PutKv(std::string_view job, std::string_view key, std::string_view value);
  absl::Status DeleteKvOfJob(std::string_view job);
  // Removes the job's record and its store keys in one atomic, synced batch.
  absl::Status DeleteJob(std::string_view job);
  // OK when writes work (see storage::Database::Writable).
  absl::Status Writable() { return db_->Writable(); }

  // The state sequence: what the open recovered, the newest write's number (every write
  // advances it; answers carry current()).
  const StateSequence& sequence() const { return sequence_; }
  // Records (synced) why this state is refused: a later start refuses it too, until the
  // operator accepts the loss. ClearLost removes it.
  absl::Status MarkLost(std::string_view why);
  absl::Status ClearLost();
  // Every later write fails with `why` and changes nothing (the scheduler refuses to go on).
  void Fence(absl::Status why) { fence_ = std::move(why); }
  const std::string& dir() const { return dir_; }
  // The write-ahead logs the open replayed ("DIR/000004.log" or "none").
  const std::string& replayed_logs() const { return db_->replayed_logs(); }

 private:
  StateDb(std::unique_ptr<storage::Database> db, uint64_t recovered_seq);
  // Writes the batch `fill` builds with the next state sequence number in it; the sequence
  // advances only when the batch was written.
  absl::Status Write(std::string_view what, bool sync,
                     absl::FunctionRef<void(rocksdb::WriteBatch&)> fill);

  std::unique_ptr<storage::Database> db_;
  std::string dir_;
  StateSequence sequence_;
  absl::Status fence_;
};

}  // namespace herd::scheduler
