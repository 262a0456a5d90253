#include "storage/private_file_system.h"

#include <sys/stat.h>

#include <filesystem>
#include <system_error>

#include "absl/strings/str_format.h"

namespace herd::storage {
namespace {

namespace fs = std::filesystem;

constexpr fs::perms kFileMode = fs::perms::owner_read | fs::perms::owner_write;
constexpr fs::perms kDirMode = fs::perms::owner_all;

// chmod after creation rather than a umask: the umask is per process, and the shard and the
// scheduler create other files (logs, port files) that keep the operator's choice.
void Restrict(const std::string& path, fs::perms mode) {
  std::error_code ec;
  fs::permissions(path, mode, fs::perm_options::replace, ec);  // best effort: the open decides
}

class PrivateFileSystem final : public rocksdb::FileSystemWrapper {
 public:
  explicit PrivateFileSystem(std::shared_ptr<rocksdb::FileSystem> base)
      : FileSystemWrapper(std::move(base)) {}

  const char* Name() const override { return "HerdPrivateFileSystem"; }

  rocksdb::IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* dbg) override {
    return Done(f, kFileMode, target()->NewWritableFile(f, o, r, dbg));
  }
  rocksdb::IOStatus ReopenWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                       std::unique_ptr<rocksdb::FSWritableFile>* r,
                                       rocksdb::IODebugContext* dbg) override {
    return Done(f, kFileMode, target()->ReopenWritableFile(f, o, r, dbg));
  }
  rocksdb::IOStatus ReuseWritableFile(const std::string& f, const std::string& old,
                                      const rocksdb::FileOptions& o,
                                      std::unique_ptr<rocksdb::FSWritableFile>* r,
                                      rocksdb::IODebugContext* dbg) override {
    return Done(f, kFileMode, target()->ReuseWritableFile(f, old, o, r, dbg));
  }
  rocksdb::IOStatus NewRandomRWFile(const std::string& f, const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSRandomRWFile>* r,
                                    rocksdb::IODebugContext* dbg) override {
    return Done(f, kFileMode, target()->NewRandomRWFile(f, o, r, dbg));
  }
  rocksdb::IOStatus CreateDir(const std::string& d, const rocksdb::IOOptions& o,
                              rocksdb::IODebugContext* dbg) override {
    return Done(d, kDirMode, target()->CreateDir(d, o, dbg));
  }
  rocksdb::IOStatus CreateDirIfMissing(const std::string& d, const rocksdb::IOOptions& o,
                                       rocksdb::IODebugContext* dbg) override {
    return Done(d, kDirMode, target()->CreateDirIfMissing(d, o, dbg));
  }

 private:
  static rocksdb::IOStatus Done(const std::string& path, fs::perms mode, rocksdb::IOStatus st) {
    if (st.ok()) Restrict(path, mode);
    return st;
  }
};

}  // namespace

std::shared_ptr<rocksdb::FileSystem> NewPrivateFileSystem(
    std::shared_ptr<rocksdb::FileSystem> base) {
  if (base == nullptr) base = rocksdb::FileSystem::Default();
  return std::make_shared<PrivateFileSystem>(std::move(base));
}

absl::Status MakeOwnerOnly(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrFormat("cannot create the state directory %s: %s", dir, ec.message()));
  }
  fs::permissions(dir, kDirMode, fs::perm_options::replace, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrFormat("cannot make the state directory %s owner-only: %s", dir, ec.message()));
  }
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::error_code entry_ec;
    if (entry.is_directory(entry_ec)) {
      Restrict(entry.path().string(), kDirMode);
    } else if (entry.is_regular_file(entry_ec)) {
      Restrict(entry.path().string(), kFileMode);
    }
  }
  return absl::OkStatus();
}

}  // namespace herd::storage
