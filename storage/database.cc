#include "storage/database.h"

#include <rocksdb/env.h>

#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "storage/private_file_system.h"

namespace herd::storage {
namespace {

bool IsLockError(const rocksdb::Status& st) {
  return st.IsIOError() && st.ToString().find("lock") != std::string::npos;
}

// RocksDB reports a damaged log or table as Corruption; a log cut in the middle of a record
// may also come back as Incomplete.
bool IsDamage(const rocksdb::Status& st) { return st.IsCorruption() || st.IsIncomplete(); }

}  // namespace

Database::Database(DatabaseOptions options) : options_(std::move(options)) {}

Database::~Database() {
  if (db_ == nullptr) return;
  for (auto* h : handles_) db_->DestroyColumnFamilyHandle(h);
  db_->Close();
}

absl::StatusOr<std::unique_ptr<Database>> Database::Open(DatabaseOptions options) {
  const std::string dir = options.dir;
  if (auto st = MakeOwnerOnly(dir); !st.ok()) return st;
  auto db = std::unique_ptr<Database>(new Database(std::move(options)));
  const DatabaseOptions& o = db->options_;
  db->env_ = rocksdb::NewCompositeEnv(NewPrivateFileSystem(o.file_system));

  rocksdb::DBOptions db_options = o.db_options;
  db_options.env = db->env_.get();
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  db_options.paranoid_checks = true;
  db_options.wal_recovery_mode = o.accept_data_loss
                                     ? rocksdb::WALRecoveryMode::kPointInTimeRecovery
                                     : rocksdb::WALRecoveryMode::kAbsoluteConsistency;
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  cfs.emplace_back(rocksdb::kDefaultColumnFamilyName, o.cf_options);
  for (const auto& name : o.column_families) cfs.emplace_back(name, o.cf_options);

  rocksdb::DB* raw = nullptr;
  rocksdb::Status st = rocksdb::DB::Open(db_options, dir, cfs, &db->handles_, &raw);
  if (!st.ok()) {
    if (IsLockError(st)) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "the state directory %s is in use by another process (%s)", dir, st.ToString()));
    }
    if (IsDamage(st)) {
      return absl::DataLossError(absl::StrFormat(
          "%s in %s is damaged and would recover to an older state, without writes that were "
          "acknowledged (%s). Restore the directory from a copy, or restart with "
          "--accept-data-loss to start from its last consistent point",
          o.what, dir, st.ToString()));
    }
    return absl::FailedPreconditionError(
        absl::StrFormat("cannot open %s in %s: %s", o.what, dir, st.ToString()));
  }
  db->db_.reset(raw);
  if (o.accept_data_loss) {
    Log().warn(
        "{} in {}: opened with --accept-data-loss: a damaged write-ahead log was replayed "
        "up to its last consistent point only",
        o.what, dir);
  }
  // Files RocksDB made before the owner-only layer (LOCK, the info LOG) are tightened too.
  if (auto tighten = MakeOwnerOnly(dir); !tighten.ok()) return tighten;
  return db;
}

absl::Status Database::Write(rocksdb::WriteBatch* batch, bool sync, std::string_view what) {
  if (auto st = Writable(); !st.ok()) return st;
  rocksdb::WriteOptions wo;
  wo.sync = sync;
  rocksdb::Status st = db_->Write(wo, batch);
  if (st.ok()) return absl::OkStatus();
  return Failed(st, what);
}

absl::Status Database::Failed(const rocksdb::Status& st, std::string_view what) {
  std::lock_guard<std::mutex> lock(failure_mu_);
  const bool first = !failed_.load();
  failure_ = absl::UnavailableError(absl::StrFormat(
      "%s in %s cannot be written (%s, while %s): writes are refused until the disk is fixed; "
      "everything acknowledged before is kept and reads are still served",
      options_.what, options_.dir, st.ToString(), what));
  last_resume_ = std::chrono::steady_clock::now();
  failed_.store(true);
  if (first) Log().error("{}", std::string(failure_.message()));
  return failure_;
}

absl::Status Database::Writable() {
  if (!failed_.load()) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(failure_mu_);
  if (!failed_.load()) return absl::OkStatus();
  const auto now = std::chrono::steady_clock::now();
  if (now - last_resume_ < options_.retry_every) return failure_;
  last_resume_ = now;
  // Resume() clears RocksDB's background error once the file system works again (it flushes
  // the memtables to fresh files, so a log that a failed write left torn is not replayed).
  rocksdb::Status st = db_->Resume();
  if (!st.ok()) return failure_;
  failed_.store(false);
  failure_ = absl::OkStatus();
  Log().info("{} in {}: writes work again", options_.what, options_.dir);
  return absl::OkStatus();
}

absl::Status Database::ReadError(const rocksdb::Status& st, std::string_view what) const {
  if (st.ok()) return absl::OkStatus();
  if (IsDamage(st)) {
    return absl::DataLossError(absl::StrFormat("%s in %s is damaged (%s, while %s)", options_.what,
                                               options_.dir, st.ToString(), what));
  }
  return absl::InternalError(
      absl::StrFormat("%s in %s: %s while %s", options_.what, options_.dir, st.ToString(), what));
}

}  // namespace herd::storage
