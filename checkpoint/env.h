#pragma once
// The file layer of checkpoints, injectable (leveldb's Env habit): every file the checkpoint
// library touches goes through an Env, so tests replace the real one (PosixEnv()) with a
// FaultInjectionEnv (checkpoint/fault_env.h) that fails or "crashes" at any chosen operation.
//
// Errors are absl::Status with the path and the operation in the message. errno maps to codes a
// caller can act on (ErrnoToStatus): ENOENT -> NOT_FOUND, EEXIST -> ALREADY_EXISTS,
// EACCES/EPERM -> PERMISSION_DENIED, EROFS -> FAILED_PRECONDITION ("read-only file system"),
// ENOSPC/EDQUOT -> RESOURCE_EXHAUSTED ("no space left"), ENOTDIR/EISDIR -> FAILED_PRECONDITION,
// anything else -> INTERNAL with strerror.
//
// Thread safety: an Env is used from several threads at once (the writer's thread and the
// caller's); implementations are thread-safe. A file object is used by one thread at a time.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace herd::checkpoint {

// A file being written from its start. Data appended is durable only after Sync().
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual absl::Status Append(std::string_view data) = 0;
  // fsync: the data appended so far survives a crash of the machine.
  virtual absl::Status Sync() = 0;
  // Closing does not sync. A file destroyed without Close() is closed, errors ignored.
  virtual absl::Status Close() = 0;
};

// A file read at any offset.
class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  // Exactly `n` bytes at `offset` into `out` (DATA_LOSS naming the file when it is shorter).
  virtual absl::Status Read(uint64_t offset, size_t n, char* out) const = 0;
  virtual uint64_t size() const = 0;
};

struct FileInfo {
  bool is_dir = false;
  // A regular file (not a directory, FIFO, socket or device). Checkpoints hold only those
  // and directories; a reader opens nothing else (a FIFO would block it, a device never end).
  bool is_regular = false;
  uint64_t size = 0;
};

// The most Env::ReadFile reads unless told otherwise: a manifest is kilobytes (a few hundred
// bytes per extent); 256 MiB is far above any.
inline constexpr uint64_t kMaxWholeFileBytes = uint64_t{256} << 20;

// "not a regular file" naming `path` and what it is (a FIFO, a socket, ...): FAILED_PRECONDITION.
absl::Status NotRegular(std::string_view path, uint32_t st_mode);

class Env {
 public:
  virtual ~Env() = default;

  // Creates `path` and the directories above it that are missing; OK when it exists.
  virtual absl::Status CreateDirs(const std::string& path) = 0;
  // Creates (or truncates) `path` for writing. FAILED_PRECONDITION, without opening it, when
  // `path` is there and is not a regular file.
  virtual absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path) = 0;
  // Opens `path` for reading. FAILED_PRECONDITION ("not a regular file"), without blocking and
  // without reading, when it is a FIFO, a socket, a device or a directory.
  virtual absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) = 0;
  // rename(2): atomic; replaces `to` when it is a file or an empty directory.
  virtual absl::Status Rename(const std::string& from, const std::string& to) = 0;
  // The names in directory `path` (not "." and ".."), sorted.
  virtual absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) = 0;
  // Removes a file, or a directory with everything in it. OK when `path` does not exist.
  virtual absl::Status RemoveAll(const std::string& path) = 0;
  // fsync of a directory: the names created, renamed or removed in it survive a crash.
  virtual absl::Status SyncDir(const std::string& path) = 0;
  // NOT_FOUND when `path` does not exist.
  virtual absl::StatusOr<FileInfo> Stat(const std::string& path) = 0;
  // Bytes available to this process on the file system holding `path`.
  virtual absl::StatusOr<uint64_t> FreeBytes(const std::string& path) = 0;

  // Conveniences over the operations above (not overridden by fault injection).
  // The whole file; DATA_LOSS naming it, before anything is allocated, when it has more than
  // `max_bytes` (a file to be read whole is small: a manifest, LATEST, OWNER).
  absl::StatusOr<std::string> ReadFile(const std::string& path,
                                       uint64_t max_bytes = kMaxWholeFileBytes);
  // Writes `data` to `path` and syncs it (not atomic; see commit.cc for the atomic pattern).
  absl::Status WriteFile(const std::string& path, std::string_view data);
  bool Exists(const std::string& path);
};

// The real file system (POSIX calls). A process-wide instance.
Env& PosixEnv();

// The Status for errno `err` from `op` ("open", "fsync", ...) on `path`.
absl::Status ErrnoToStatus(int err, std::string_view op, std::string_view path);

// "a/b" from "a" and "b" (one slash between them).
std::string JoinPath(std::string_view dir, std::string_view name);

}  // namespace herd::checkpoint
