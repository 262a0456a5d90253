#pragma once
// One RocksDB database of herd's state (a shard's `--state`, the scheduler's `--state`), with
// the rules every one of them follows:
//
//   * Owner-only: the directory is 0700 and every file 0600 (private_file_system.h).
//   * Recovery never silently goes back in time. The write-ahead log is replayed in
//     kAbsoluteConsistency mode with paranoid checks, so a log with flipped bytes or cut short
//     fails the open with DATA_LOSS naming the file, instead of starting from an older state
//     with acknowledged writes gone. `accept_data_loss` (the operator's --accept-data-loss)
//     opens it anyway at the last consistent point (kPointInTimeRecovery), loudly.
//   * A write that fails (disk full, I/O error, read-only file system) never aborts the
//     process: it and every later write are UNAVAILABLE naming the cause, reads still work,
//     and nothing acknowledged is lost (a failed WriteBatch is not applied). At most once per
//     `retry_every` a write first tries to recover: a probe write and, if the disk takes it,
//     a reopen of the database that tolerates the torn tail the failed write may have left
//     (that record was never acknowledged). Once the disk is back, writes work again without
//     a restart.
//
// Thread-safe: RocksDB's DB is; a reopen waits for every reader that holds Pin().

#include <rocksdb/db.h>
#include <rocksdb/file_system.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"

namespace herd::storage {

struct DatabaseOptions {
  std::string dir;
  // Names the database in messages: "the shard state", "the scheduler state".
  std::string what = "the state";
  // Column families besides "default" (which is always handle 0).
  std::vector<std::string> column_families;
  rocksdb::DBOptions db_options;
  rocksdb::ColumnFamilyOptions cf_options;
  // Open a damaged database at its last consistent point instead of refusing it.
  bool accept_data_loss = false;
  // A log whose last record is incomplete (a process killed while RocksDB wrote a record larger
  // than one write, or killed after a full disk cut a write short: never acknowledged) opens
  // without it instead of being refused. Only for a database whose owner checks what it
  // recovered against what it acknowledged (the shards: their durable version against the
  // scheduler's, server/recovery_check.h; the scheduler: its state sequence against what the
  // job's processes heard, scheduler/witness.cc), since a log cut by hand inside a record, or
  // a power cut that took an acknowledged record's end, looks the same. Damage anywhere but in
  // the last record is refused either way.
  bool drop_torn_last_record = false;
  // Below the owner-only layer: the local disk when null; tests pass a FaultFileSystem.
  std::shared_ptr<rocksdb::FileSystem> file_system;
  // The least time between two attempts to resume after a failed write.
  std::chrono::milliseconds retry_every{1000};
};

class Database {
 public:
  // FAILED_PRECONDITION: the directory is in use by another process, or cannot be created or
  // opened; DATA_LOSS: the write-ahead log or another file is damaged (see above).
  static absl::StatusOr<std::unique_ptr<Database>> Open(DatabaseOptions options);
  ~Database();

  // Reads go through db() and handle() while holding Pin(), so a recovery reopen cannot pull
  // the database away underneath them.
  [[nodiscard]] std::shared_lock<std::shared_mutex> Pin() const {
    return std::shared_lock<std::shared_mutex>(db_mu_);
  }
  rocksdb::DB* db() const { return db_.get(); }
  // 0: "default", then options.column_families in order.
  rocksdb::ColumnFamilyHandle* handle(int i) const { return handles_[i]; }
  const std::string& dir() const { return options_.dir; }
  // The write-ahead logs the open replayed ("DIR/000004.log, ..." or "none"), for messages
  // about what the recovery found (RocksDB removes them once replayed).
  const std::string& replayed_logs() const { return replayed_logs_; }

  // Writes the batch `fill` builds atomically through the write-ahead log (`sync`: fsynced
  // too). `fill` runs with the database pinned, so it may use handle(). UNAVAILABLE naming the
  // cause when it cannot be written; `what` says what was being written.
  absl::Status Write(std::string_view what, bool sync,
                     absl::FunctionRef<void(rocksdb::WriteBatch&)> fill);
  // OK when writes work (after trying to resume if they failed before), else the UNAVAILABLE
  // error of the last failed write. Lets a caller refuse a request before it changes anything.
  absl::Status Writable();
  // A failed read or iteration as a status: DATA_LOSS for damaged files, INTERNAL otherwise.
  absl::Status ReadError(const rocksdb::Status& st, std::string_view what) const;

 private:
  explicit Database(DatabaseOptions options);
  // Opens db_ and handles_ (db_mu_ held exclusively, or before anyone else sees the object).
  rocksdb::Status OpenDb(rocksdb::WALRecoveryMode mode);
  void CloseDb();
  absl::Status Failed(const rocksdb::Status& st, std::string_view what);
  // Probe the disk and reopen (failure_mu_ held). OK once writes work again.
  rocksdb::Status Recover();
  // Writes, syncs and removes a small file in the directory: does the disk take writes?
  rocksdb::IOStatus ProbeDisk();

  DatabaseOptions options_;
  std::string replayed_logs_;
  std::unique_ptr<rocksdb::Env> env_;  // over the file systems above; outlives db_
  mutable std::shared_mutex db_mu_;    // exclusive only for a recovery reopen
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  std::unique_ptr<rocksdb::DB> db_;  // null only after a reopen that failed

  std::atomic<bool> failed_{false};
  std::mutex failure_mu_;
  absl::Status failure_;                               // guarded by failure_mu_
  std::chrono::steady_clock::time_point last_resume_;  // guarded by failure_mu_
};

}  // namespace herd::storage
