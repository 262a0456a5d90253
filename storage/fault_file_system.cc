#include "storage/fault_file_system.h"

#include <thread>

namespace herd::storage {
namespace {

// A writable file whose appends, flushes and syncs fail while its file system has a fault.
class FaultWritableFile final : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  FaultWritableFile(std::unique_ptr<rocksdb::FSWritableFile> file, FaultFileSystem* fs)
      : FSWritableFileOwnerWrapper(std::move(file)), fs_(fs) {}

  // A full disk takes part of a write before it refuses the rest: half of the data lands, so
  // the tests meet the torn record a real ENOSPC leaves at the end of a log.
  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& o,
                           rocksdb::IODebugContext* dbg) override {
    if (auto st = fs_->Refuse(); !st.ok()) {
      if (data.size() > 1) {
        FSWritableFileOwnerWrapper::Append(rocksdb::Slice(data.data(), data.size() / 2), o, dbg)
            .PermitUncheckedError();
      }
      return st;
    }
    return FSWritableFileOwnerWrapper::Append(data, o, dbg);
  }
  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& o,
                           const rocksdb::DataVerificationInfo&,
                           rocksdb::IODebugContext* dbg) override {
    return Append(data, o, dbg);
  }
  rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset,
                                     const rocksdb::IOOptions& o,
                                     rocksdb::IODebugContext* dbg) override {
    if (auto st = fs_->Refuse(); !st.ok()) return st;
    return FSWritableFileOwnerWrapper::PositionedAppend(data, offset, o, dbg);
  }
  rocksdb::IOStatus Flush(const rocksdb::IOOptions& o, rocksdb::IODebugContext* dbg) override {
    if (auto st = fs_->Refuse(); !st.ok()) return st;
    return FSWritableFileOwnerWrapper::Flush(o, dbg);
  }
  rocksdb::IOStatus Sync(const rocksdb::IOOptions& o, rocksdb::IODebugContext* dbg) override {
    if (auto st = fs_->Refuse(); !st.ok()) return st;
    fs_->Syncing();
    return FSWritableFileOwnerWrapper::Sync(o, dbg);
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& o, rocksdb::IODebugContext* dbg) override {
    if (auto st = fs_->Refuse(); !st.ok()) return st;
    fs_->Syncing();
    return FSWritableFileOwnerWrapper::Fsync(o, dbg);
  }

 private:
  FaultFileSystem* fs_;
};

}  // namespace

FaultFileSystem::FaultFileSystem(std::shared_ptr<rocksdb::FileSystem> base)
    : FileSystemWrapper(base != nullptr ? std::move(base) : rocksdb::FileSystem::Default()) {}

rocksdb::IOStatus FaultFileSystem::WriteStatus() const {
  switch (fault_.load()) {
    case Fault::kNone:
      return rocksdb::IOStatus::OK();
    case Fault::kNoSpace:
      return rocksdb::IOStatus::NoSpace("No space left on device (injected)");
    case Fault::kIoError:
      return rocksdb::IOStatus::IOError("Input/output error (injected)");
    case Fault::kReadOnly:
      return rocksdb::IOStatus::IOError("Read-only file system (injected)");
  }
  return rocksdb::IOStatus::OK();
}

rocksdb::IOStatus FaultFileSystem::Refuse() {
  rocksdb::IOStatus st = WriteStatus();
  if (!st.ok()) refused_.fetch_add(1);
  return st;
}

void FaultFileSystem::Syncing() {
  syncs_.fetch_add(1);
  if (const int64_t ms = sync_delay_ms_.load(); ms > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  }
}

rocksdb::IOStatus FaultFileSystem::Wrap(rocksdb::IOStatus st,
                                        std::unique_ptr<rocksdb::FSWritableFile>* r) {
  if (st.ok()) *r = std::make_unique<FaultWritableFile>(std::move(*r), this);
  return st;
}

rocksdb::IOStatus FaultFileSystem::NewWritableFile(const std::string& f,
                                                   const rocksdb::FileOptions& o,
                                                   std::unique_ptr<rocksdb::FSWritableFile>* r,
                                                   rocksdb::IODebugContext* dbg) {
  if (auto st = Refuse(); !st.ok()) return st;
  return Wrap(target()->NewWritableFile(f, o, r, dbg), r);
}

rocksdb::IOStatus FaultFileSystem::ReopenWritableFile(const std::string& f,
                                                      const rocksdb::FileOptions& o,
                                                      std::unique_ptr<rocksdb::FSWritableFile>* r,
                                                      rocksdb::IODebugContext* dbg) {
  if (auto st = Refuse(); !st.ok()) return st;
  return Wrap(target()->ReopenWritableFile(f, o, r, dbg), r);
}

rocksdb::IOStatus FaultFileSystem::ReuseWritableFile(const std::string& f, const std::string& old,
                                                     const rocksdb::FileOptions& o,
                                                     std::unique_ptr<rocksdb::FSWritableFile>* r,
                                                     rocksdb::IODebugContext* dbg) {
  if (auto st = Refuse(); !st.ok()) return st;
  return Wrap(target()->ReuseWritableFile(f, old, o, r, dbg), r);
}

rocksdb::IOStatus FaultFileSystem::RenameFile(const std::string& from, const std::string& to,
                                              const rocksdb::IOOptions& o,
                                              rocksdb::IODebugContext* dbg) {
  if (auto st = Refuse(); !st.ok()) return st;
  return target()->RenameFile(from, to, o, dbg);
}

rocksdb::IOStatus FaultFileSystem::CreateDir(const std::string& d, const rocksdb::IOOptions& o,
                                             rocksdb::IODebugContext* dbg) {
  if (auto st = Refuse(); !st.ok()) return st;
  return target()->CreateDir(d, o, dbg);
}

}  // namespace herd::storage
