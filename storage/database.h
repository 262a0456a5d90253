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
//     `retry_every` a write first asks RocksDB to resume; once the disk is back, writes work
//     again without a restart.
//
// Thread-safe: RocksDB's DB is; the failure state has its own mutex.

#include <rocksdb/db.h>
#include <rocksdb/file_system.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

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

  rocksdb::DB* db() const { return db_.get(); }
  // 0: "default", then options.column_families in order.
  rocksdb::ColumnFamilyHandle* handle(int i) const { return handles_[i]; }
  const std::string& dir() const { return options_.dir; }

  // Writes `batch` atomically through the write-ahead log (`sync`: fsynced too). UNAVAILABLE
  // naming the cause when it cannot be written; `what` says what was being written.
  absl::Status Write(rocksdb::WriteBatch* batch, bool sync, std::string_view what);
  // OK when writes work (after trying to resume if they failed before), else the UNAVAILABLE
  // error of the last failed write. Lets a caller refuse a request before it changes anything.
  absl::Status Writable();
  // A failed read or iteration as a status: DATA_LOSS for damaged files, INTERNAL otherwise.
  absl::Status ReadError(const rocksdb::Status& st, std::string_view what) const;

 private:
  explicit Database(DatabaseOptions options);
  absl::Status Failed(const rocksdb::Status& st, std::string_view what);

  DatabaseOptions options_;
  std::unique_ptr<rocksdb::Env> env_;  // over the file systems above; outlives db_
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  std::unique_ptr<rocksdb::DB> db_;

  std::atomic<bool> failed_{false};
  std::mutex failure_mu_;
  absl::Status failure_;                               // guarded by failure_mu_
  std::chrono::steady_clock::time_point last_resume_;  // guarded by failure_mu_
};

}  // namespace herd::storage
