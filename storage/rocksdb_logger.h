#pragma once
// RocksDB's diagnostic log, sent to herd's log (stderr) instead of a LOG file in the state
// directory. A LOG file lives on the same disk as the state: when that disk fills up, RocksDB
// fails to append a log line, and the next line it logs trips an assertion in its file writer
// (an abort in builds with assertions on, like Debian's). Errors and warnings (e.g. the
// "dropping N bytes" of a damaged write-ahead log) appear at those levels; the rest at debug.

#include <rocksdb/env.h>

#include <memory>

namespace herd::storage {

std::shared_ptr<rocksdb::Logger> NewRocksDbLogger();

}  // namespace herd::storage
