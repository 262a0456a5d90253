#pragma once
// A file system whose writes can be made to fail, for the tests of what herd does when the
// disk fills up, breaks or turns read-only (leveldb's fault-injection habit). Reads always
// pass through. Thread-safe: the fault may change while RocksDB writes from its threads.
//
//   auto faults = std::make_shared<FaultFileSystem>();
//   open the database with `file_system = faults`
//   faults->Fail(Fault::kNoSpace);  // every write from now on: "No space left on device"
//   faults->Fail(Fault::kNone);     // the disk is back

#include <rocksdb/file_system.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

namespace herd::storage {

enum class Fault {
  kNone,
  kNoSpace,   // ENOSPC
  kIoError,   // EIO
  kReadOnly,  // EROFS
};

class FaultFileSystem final : public rocksdb::FileSystemWrapper {
 public:
  // Wraps `base` (the local file system when null).
  explicit FaultFileSystem(std::shared_ptr<rocksdb::FileSystem> base = nullptr);

  const char* Name() const override { return "HerdFaultFileSystem"; }

  void Fail(Fault fault) { fault_.store(fault); }
  Fault fault() const { return fault_.load(); }
  // The error a write gets now (OK when no fault is set).
  rocksdb::IOStatus WriteStatus() const;
  // How many writes were refused so far.
  int64_t refused() const { return refused_.load(); }
  // A slow disk: every sync of a written file takes at least `d` more (tests of what waits
  // behind a synced write). And how many syncs there were so far.
  void SlowSyncs(std::chrono::milliseconds d) { sync_delay_ms_.store(d.count()); }
  int64_t syncs() const { return syncs_.load(); }
  // Counts a sync and waits out the slow disk's delay.
  void Syncing();

  rocksdb::IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReopenWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                       std::unique_ptr<rocksdb::FSWritableFile>* r,
                                       rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReuseWritableFile(const std::string& f, const std::string& old,
                                      const rocksdb::FileOptions& o,
                                      std::unique_ptr<rocksdb::FSWritableFile>* r,
                                      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus RenameFile(const std::string& from, const std::string& to,
                               const rocksdb::IOOptions& o, rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus CreateDir(const std::string& d, const rocksdb::IOOptions& o,
                              rocksdb::IODebugContext* dbg) override;

  // Counts a refused write and returns its error; OK when no fault is set.
  rocksdb::IOStatus Refuse();

 private:
  rocksdb::IOStatus Wrap(rocksdb::IOStatus st, std::unique_ptr<rocksdb::FSWritableFile>* r);

  std::atomic<Fault> fault_{Fault::kNone};
  std::atomic<int64_t> refused_{0};
  std::atomic<int64_t> sync_delay_ms_{0};
  std::atomic<int64_t> syncs_{0};
};

}  // namespace herd::storage
