#pragma once
// A shard's durable state in RocksDB (one database under `herd server --state DIR`), one
// column family per kind of state so each can be tuned and read on its own:
//   params    <job>\0<tensor><chunk>  fp32 parameters
//   optimizer <job>\0<tensor><chunk>  fp32 optimizer slots, slot0 then slot1
//   residual  <job>\0<tensor><chunk>  ps_ec server residual epsilon (fp32)
//   result    <job>\0<tensor><chunk>  ps_ec compressed result of the last round
//   meta      <job>\0<tensor><chunk>  version (int64) and ps_async worker clocks (int64 each)
// (tensor and chunk big-endian 32-bit). All the writes of one key's round are one WriteBatch,
// so a restart sees a key either before or after a round, never half of one. Writes go through
// the write-ahead log: a write that returned survives a SIGKILL of the shard (not a power cut:
// the log is not fsynced; see docs/parameter_server.md).

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/key_record.h"

namespace rocksdb {
class DB;
class ColumnFamilyHandle;
}  // namespace rocksdb

namespace herd::server {

class ShardStore final : public KeyWriter {
 public:
  // Opens (creating if missing) the database in `dir`. FAILED_PRECONDITION when another
  // process holds it, naming the directory.
  static absl::StatusOr<std::unique_ptr<ShardStore>> Open(const std::string& dir);
  ~ShardStore() override;

  absl::Status Write(const std::string& job, const KeyRecordView& record) override;
  // Every key stored for `job`. DATA_LOSS for a record that does not parse.
  absl::StatusOr<std::vector<KeyRecord>> Load(const std::string& job);

 private:
  ShardStore() = default;
  std::string dir_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;  // default, then the kinds above
  std::unique_ptr<rocksdb::DB> db_;
};

}  // namespace herd::server
