#pragma once
// An Env over another one that fails on purpose, for tests of every phase of a save (leveldb's
// fault_injection_test habit). It counts the operations that change the disk (creating a
// directory or a file, appending, syncing, closing, renaming, removing, syncing a directory);
// reads and Stat are not counted, so a test can look around freely.
//
//  - FailAt(n, error): operation n fails with `error` (a full disk: RESOURCE_EXHAUSTED, a
//    read-only disk: FAILED_PRECONDITION ...) and the ones after it run: a transient error.
//  - CrashAt(n): operation n and every one after it fail with UNAVAILABLE, as if the process
//    had been killed just before it: what was done stays done (in the page cache).
//  - DropUnsyncedData(): then what a power cut would lose goes too: file data appended since
//    the file's last Sync, files and directories created, and renames made, since the last
//    SyncDir of their directory (renames undone, newest first; a replaced file gets its old
//    contents back).
//
// Thread-safe. Paths are compared as given, so a test uses one spelling of its directory.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/env.h"

namespace herd::checkpoint {

class FaultInjectionEnv final : public Env {
 public:
  explicit FaultInjectionEnv(Env& base = PosixEnv()) : base_(base) {}

  void FailAt(int64_t n, absl::Status error);
  void CrashAt(int64_t n);
  // FreeBytes() answers `bytes` from now on (a disk that is nearly full).
  void SetFreeBytes(uint64_t bytes);
  // Forgets the faults set (the count goes on).
  void ClearFaults();
  // Operations counted so far (the next one is number operations() + 1).
  int64_t operations() const;
  // "3: rename a -> b" for each operation counted so far, for test messages.
  std::vector<std::string> log() const;
  void DropUnsyncedData();

  absl::Status CreateDirs(const std::string& path) override;
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override;
  absl::Status Rename(const std::string& from, const std::string& to) override;
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) override;
  absl::Status RemoveAll(const std::string& path) override;
  absl::Status SyncDir(const std::string& path) override;
  absl::StatusOr<FileInfo> Stat(const std::string& path) override;
  absl::StatusOr<uint64_t> FreeBytes(const std::string& path) override;

 private:
  class File;
  friend class File;
  // Counts operation `what` and returns the fault it meets (OK: go ahead).
  absl::Status Operation(const std::string& what);
  void SyncedFile(const std::string& path, uint64_t size);
  void AppendedFile(const std::string& path, uint64_t size);

  // Something a power cut would undo, recorded until its directory is synced.
  struct Pending {
    enum Kind { kCreated, kRenamed } kind;
    std::string dir;   // the directory whose sync makes it durable
    std::string path;  // kCreated: what was created; kRenamed: the new name
    std::string from;  // kRenamed: the old name
    bool replaced = false;
    std::string old_contents;  // kRenamed over a file: what `path` held before
  };

  Env& base_;
  mutable std::mutex mu_;
  int64_t count_ = 0;
  int64_t fail_at_ = 0;
  absl::Status fail_error_;
  int64_t crash_at_ = 0;
  std::optional<uint64_t> free_bytes_;
  std::vector<std::string> log_;
  std::map<std::string, uint64_t> synced_size_;  // files written here: bytes known durable
  std::vector<Pending> pending_;
};

}  // namespace herd::checkpoint
