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
// the log is not fsynced; see docs/parameter_server.md). Opening, damage and disk faults
// follow storage/database.h: a damaged log is DATA_LOSS, a failed write UNAVAILABLE until the
// disk is back.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/key_record.h"
#include "storage/database.h"

namespace herd::server {

class ShardStore final : public KeyWriter {
 public:
  struct Options {
    bool accept_data_loss = false;                     // --accept-data-loss
    std::shared_ptr<rocksdb::FileSystem> file_system;  // null: the local disk (tests: faults)
  };
  // Opens (creating if missing) the database in `dir`. FAILED_PRECONDITION when another
  // process holds it, naming the directory; DATA_LOSS when it is damaged.
  static absl::StatusOr<std::unique_ptr<ShardStore>> Open(const std::string& dir, Options options);
  static absl::StatusOr<std::unique_ptr<ShardStore>> Open(const std::string& dir) {
    return Open(dir, Options{});
  }
  ~ShardStore() override;

  absl::Status Write(const std::string& job, const KeyRecordView& record) override;
  absl::Status Writable() override { return db_->Writable(); }
  const std::string& dir() const { return dir_; }
  // The write-ahead logs the open replayed (storage::Database::replayed_logs).
  const std::string& replayed_logs() const { return db_->replayed_logs(); }
  // Every key stored for `job`. DATA_LOSS for a record that does not parse.
  absl::StatusOr<std::vector<KeyRecord>> Load(const std::string& job);

 private:
  ShardStore() = default;
  std::string dir_;
  std::unique_ptr<storage::Database> db_;
};

}  // namespace herd::server
