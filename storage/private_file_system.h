#pragma once
// The file system every herd database is opened on: the local one, except that what RocksDB
// creates is readable by its owner only (directories 0700, files 0600). The state holds a
// job's parameters and the scheduler's node ids and bootstrap secrets; nobody else on the
// machine needs to read them.

#include <rocksdb/file_system.h>

#include <memory>
#include <string>

#include "absl/status/status.h"

namespace herd::storage {

// Wraps `base` (the local file system when null).
std::shared_ptr<rocksdb::FileSystem> NewPrivateFileSystem(
    std::shared_ptr<rocksdb::FileSystem> base = nullptr);

// Creates `dir` (and its parents) when missing and makes it and every file in it owner-only:
// a directory written by an older herd, or restored from a backup, is tightened too.
absl::Status MakeOwnerOnly(const std::string& dir);

}  // namespace herd::storage
