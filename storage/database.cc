#include "storage/database.h"

#include <rocksdb/env.h>
#include <rocksdb/listener.h>

#include <filesystem>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "metrics/process_metrics.h"
#include "metrics/timer.h"
#include "storage/private_file_system.h"
#include "storage/rocksdb_logger.h"

namespace herd::storage {
namespace {

bool IsLockError(const rocksdb::Status& st) {
  return st.IsIOError() && st.ToString().find("lock") != std::string::npos;
}

// RocksDB reports a damaged log or table as Corruption; a log cut in the middle of a record
// may also come back as Incomplete.
bool IsDamage(const rocksdb::Status& st) { return st.IsCorruption() || st.IsIncomplete(); }

// A process killed while RocksDB wrote a record (a large batch goes out in several writes)
// leaves that last record incomplete: the log ends inside it, which RocksDB reports as
// "truncated record body" or "error reading trailing data". That write never returned, so it
// was never acknowledged. Damage anywhere else (a checksum that does not hold) is not this.
bool IsTornLastRecord(const rocksdb::Status& st) {
  if (!st.IsCorruption()) return false;
  const std::string why = st.ToString();
  return why.find("truncated record body") != std::string::npos ||
         why.find("error reading trailing data") != std::string::npos;
}

// The write-ahead logs an open replays (RocksDB's corruption messages name no file).
std::string WriteAheadLogs(const std::string& dir) {
  std::vector<std::string> logs;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::error_code size_ec;
    if (e.path().extension() == ".log" && e.file_size(size_ec) > 0) {
      logs.push_back(e.path().string());
    }
  }
  std::sort(logs.begin(), logs.end());
  return logs.empty() ? "none" : absl::StrJoin(logs, ", ");
}

// Turns off RocksDB's own recovery from a full disk (its SstFileManager resumes in the
// background): that resume touches the failed log writer too. Recover() does it instead.
class NoAutoRecovery final : public rocksdb::EventListener {
 public:
  const char* Name() const override { return "HerdNoAutoRecovery"; }
  void OnErrorRecoveryBegin(rocksdb::BackgroundErrorReason, rocksdb::Status,
                            bool* auto_recovery) override {
    *auto_recovery = false;
  }
};

}  // namespace

Database::Database(DatabaseOptions options) : options_(std::move(options)) {}

Database::~Database() { CloseDb(); }

void Database::CloseDb() {
  if (db_ == nullptr) return;
  for (auto* h : handles_) db_->DestroyColumnFamilyHandle(h);
  handles_.clear();
  db_->Close().PermitUncheckedError();
  db_.reset();
}

rocksdb::Status Database::OpenDb(rocksdb::WALRecoveryMode mode) {
  const DatabaseOptions& o = options_;
  rocksdb::DBOptions db_options = o.db_options;
  db_options.env = env_.get();
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  db_options.paranoid_checks = true;
  // RocksDB's own background resume would touch a failed log writer (see Recover()).
  db_options.max_bgerror_resume_count = 0;
  db_options.listeners.push_back(std::make_shared<NoAutoRecovery>());
  db_options.info_log = NewRocksDbLogger();
  db_options.wal_recovery_mode = mode;
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  cfs.emplace_back(rocksdb::kDefaultColumnFamilyName, o.cf_options);
  for (const auto& name : o.column_families) cfs.emplace_back(name, o.cf_options);
  rocksdb::DB* raw = nullptr;
  handles_.clear();
  rocksdb::Status st = rocksdb::DB::Open(db_options, o.dir, cfs, &handles_, &raw);
  if (st.ok()) db_.reset(raw);
  return st;
}

absl::StatusOr<std::unique_ptr<Database>> Database::Open(DatabaseOptions options) {
  const std::string dir = options.dir;
  if (auto st = MakeOwnerOnly(dir); !st.ok()) return st;
  auto db = std::unique_ptr<Database>(new Database(std::move(options)));
  const DatabaseOptions& o = db->options_;
  db->env_ = rocksdb::NewCompositeEnv(NewPrivateFileSystem(o.file_system));
  const std::string logs = WriteAheadLogs(dir);  // before the open replays and removes them
  db->replayed_logs_ = logs;
  rocksdb::Status st =
      db->OpenDb(o.accept_data_loss ? rocksdb::WALRecoveryMode::kPointInTimeRecovery
                                    : rocksdb::WALRecoveryMode::kAbsoluteConsistency);
  if (o.drop_torn_last_record && IsTornLastRecord(st)) {
    Log().warn(
        "{} in {}: the last record of a write-ahead log ({}) is incomplete: a write cut "
        "by a crash, never acknowledged; it is dropped ({})",
        o.what, dir, logs, st.ToString());
    db->CloseDb();
    st = db->OpenDb(rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords);
  }
  if (!st.ok()) {
    if (IsLockError(st)) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "the state directory %s is in use by another process (%s)", dir, st.ToString()));
    }
    if (IsDamage(st)) {
      return absl::DataLossError(absl::StrFormat(
          "%s in %s is damaged and would recover to an older state, without writes that were "
          "acknowledged (%s; write-ahead logs: %s). Restore the directory from a copy, or "
          "restart with --accept-data-loss to start from its last consistent point",
          o.what, dir, st.ToString(), logs));
    }
    return absl::FailedPreconditionError(
        absl::StrFormat("cannot open %s in %s: %s", o.what, dir, st.ToString()));
  }
  if (o.accept_data_loss) {
    Log().warn(
        "{} in {}: opened with --accept-data-loss: damaged write-ahead logs ({}) were "
        "replayed up to their last consistent point only",
        o.what, dir, logs);
  }
  // Files RocksDB made before the owner-only layer (LOCK, the info LOG) are tightened too.
  if (auto tighten = MakeOwnerOnly(dir); !tighten.ok()) return tighten;
  return db;
}

absl::Status Database::Write(std::string_view what, bool sync,
                             absl::FunctionRef<void(rocksdb::WriteBatch&)> fill) {
  if (auto st = Writable(); !st.ok()) return st;
  rocksdb::Status st;
  {
    auto pin = Pin();
    if (db_ == nullptr) {  // a recovery reopen failed: refused (with the first cause) until
      pin.unlock();        // one works
      std::lock_guard<std::mutex> lock(failure_mu_);
      return failure_;
    }
    rocksdb::WriteBatch batch;
    fill(batch);
    rocksdb::WriteOptions wo;
    wo.sync = sync;
    metrics::ScopedTimer timer(metrics::ProcessMetrics::Get().rocksdb_write_seconds(sync));
    st = db_->Write(wo, &batch);
  }
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

rocksdb::IOStatus Database::ProbeDisk() {
  rocksdb::FileSystem* fs = env_->GetFileSystem().get();
  const std::string probe = options_.dir + "/WRITE_PROBE";
  std::unique_ptr<rocksdb::FSWritableFile> file;
  rocksdb::IOStatus st = fs->NewWritableFile(probe, rocksdb::FileOptions(), &file, nullptr);
  if (st.ok()) st = file->Append(std::string(4096, '\0'), rocksdb::IOOptions(), nullptr);
  if (st.ok()) st = file->Sync(rocksdb::IOOptions(), nullptr);
  if (file != nullptr) file->Close(rocksdb::IOOptions(), nullptr).PermitUncheckedError();
  fs->DeleteFile(probe, rocksdb::IOOptions(), nullptr).PermitUncheckedError();
  return st;
}

rocksdb::Status Database::Recover() {
  // Not DB::Resume(): after a failed write-ahead log write RocksDB holds the error fatal, and
  // resuming would touch the failed log writer again, which asserts in builds with assertions
  // on (Debian's). Instead, once the disk takes writes again, reopen. The failed write may
  // have left a torn record at the log's end; it was never acknowledged, so this reopen (only
  // this one) tolerates it.
  if (rocksdb::IOStatus probe = ProbeDisk(); !probe.ok()) return probe;
  std::unique_lock<std::shared_mutex> exclusive(db_mu_);
  CloseDb();
  rocksdb::Status st = OpenDb(rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords);
  if (!st.ok()) {
    Log().error("{} in {}: reopening after a failed write: {}", options_.what, options_.dir,
                st.ToString());
  }
  return st;
}

absl::Status Database::Writable() {
  if (!failed_.load()) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(failure_mu_);
  if (!failed_.load()) return absl::OkStatus();
  const auto now = std::chrono::steady_clock::now();
  if (now - last_resume_ < options_.retry_every) return failure_;
  last_resume_ = now;
  if (rocksdb::Status st = Recover(); !st.ok()) {
    Log().debug("{} in {}: not writable yet: {}", options_.what, options_.dir, st.ToString());
    return failure_;
  }
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
