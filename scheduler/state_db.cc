#include "scheduler/state_db.h"

#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <charconv>

#include "absl/strings/str_format.h"

namespace herd::scheduler {
namespace {

constexpr std::string_view kJobPrefix = "job/";
constexpr std::string_view kKvPrefix = "kv/";
constexpr std::string_view kNextNodeId = "meta/next_node_id";

absl::Status FromRocks(const rocksdb::Status& s, std::string_view what, std::string_view dir) {
  if (s.ok()) return absl::OkStatus();
  if (s.IsIOError() && s.ToString().find("lock") != std::string::npos) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: the state directory %s is in use by another scheduler (%s)", what, dir, s.ToString()));
  }
  return absl::InternalError(absl::StrFormat("%s in %s: %s", what, dir, s.ToString()));
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

}  // namespace

StateDb::StateDb(std::unique_ptr<rocksdb::DB> db, std::string dir)
    : db_(std::move(db)), dir_(std::move(dir)) {}

StateDb::~StateDb() = default;

absl::StatusOr<std::unique_ptr<StateDb>> StateDb::Open(const std::string& dir) {
  rocksdb::Options options;
  options.create_if_missing = true;
  // The state is small (jobs and membership): keep RocksDB's footprint small too.
  options.max_background_jobs = 1;
  options.keep_log_file_num = 2;
  rocksdb::DB* raw = nullptr;
  auto s = rocksdb::DB::Open(options, dir, &raw);
  if (auto st = FromRocks(s, "opening the scheduler state", dir); !st.ok()) return st;
  return std::unique_ptr<StateDb>(new StateDb(std::unique_ptr<rocksdb::DB>(raw), dir));
}

absl::StatusOr<StateDb::Contents> StateDb::Load() {
  Contents out;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::string key = it->key().ToString();
    const rocksdb::Slice value = it->value();
    if (StartsWith(key, kJobPrefix)) {
      herd::v1::JobStatus job;
      if (!job.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
        out.unreadable[key] = "the record does not parse as a JobStatus";
        continue;
      }
      out.jobs[key.substr(kJobPrefix.size())] = std::move(job);
    } else if (StartsWith(key, kKvPrefix)) {
      const std::string rest = key.substr(kKvPrefix.size());
      const size_t slash = rest.find('/');  // job names never contain '/'
      if (slash == std::string::npos) continue;
      out.kv[rest.substr(0, slash)][rest.substr(slash + 1)] = value.ToString();
    } else if (key == kNextNodeId) {
      const std::string v = value.ToString();
      uint64_t id = 0;
      auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), id);
      // A bad counter is recomputed from the members by the caller.
      if (ec == std::errc() && p == v.data() + v.size()) out.next_node_id = id;
    }
  }
  if (auto st = FromRocks(it->status(), "reading the scheduler state", dir_); !st.ok()) return st;
  return out;
}

std::string StateDb::JobKey(std::string_view job) {
  return absl::StrFormat("%s%s", kJobPrefix, job);
}

absl::Status StateDb::SetAside(const std::string& key) {
  std::string value;
  auto s = db_->Get(rocksdb::ReadOptions(), key, &value);
  if (auto st = FromRocks(s, "reading " + key, dir_); !st.ok()) return st;
  rocksdb::WriteBatch batch;
  batch.Put("bad/" + key, value);
  batch.Delete(key);
  rocksdb::WriteOptions wo;
  wo.sync = true;
  return FromRocks(db_->Write(wo, &batch), "setting aside " + key, dir_);
}

absl::Status StateDb::PutJob(const herd::v1::JobStatus& job, uint64_t next_node_id, bool sync) {
  rocksdb::WriteBatch batch;
  batch.Put(absl::StrFormat("%s%s", kJobPrefix, job.spec().name()), job.SerializeAsString());
  if (next_node_id != 0) batch.Put(std::string(kNextNodeId), std::to_string(next_node_id));
  rocksdb::WriteOptions wo;
  wo.sync = sync;
  return FromRocks(db_->Write(wo, &batch), "writing job " + job.spec().name(), dir_);
}

absl::Status StateDb::PutKv(std::string_view job, std::string_view key, std::string_view value) {
  rocksdb::WriteOptions wo;
  return FromRocks(db_->Put(wo, absl::StrFormat("%s%s/%s", kKvPrefix, job, key),
                            rocksdb::Slice(value.data(), value.size())),
                   "writing a store key", dir_);
}

absl::Status StateDb::DeleteKvOfJob(std::string_view job) {
  const std::string begin = absl::StrFormat("%s%s/", kKvPrefix, job);
  const std::string end = absl::StrFormat("%s%s0", kKvPrefix, job);  // '0' follows '/'
  rocksdb::WriteOptions wo;
  return FromRocks(db_->DeleteRange(wo, db_->DefaultColumnFamily(), begin, end),
                   "deleting the store of job " + std::string(job), dir_);
}

absl::Status StateDb::DeleteJob(std::string_view job) {
  rocksdb::WriteBatch batch;
  batch.Delete(absl::StrFormat("%s%s", kJobPrefix, job));
  batch.DeleteRange(absl::StrFormat("%s%s/", kKvPrefix, job),
                    absl::StrFormat("%s%s0", kKvPrefix, job));  // '0' follows '/'
  rocksdb::WriteOptions wo;
  wo.sync = true;
  return FromRocks(db_->Write(wo, &batch), "deleting job " + std::string(job), dir_);
}

}  // namespace herd::scheduler
