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

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

}  // namespace

StateDb::StateDb(std::unique_ptr<storage::Database> db) : db_(std::move(db)), dir_(db_->dir()) {}

StateDb::~StateDb() = default;

absl::StatusOr<std::unique_ptr<StateDb>> StateDb::Open(const std::string& dir, Options options) {
  storage::DatabaseOptions o;
  o.dir = dir;
  o.what = "the scheduler state";
  // The state is small (jobs and membership): keep RocksDB's footprint small too.
  o.db_options.max_background_jobs = 1;
  o.db_options.keep_log_file_num = 2;
  o.accept_data_loss = options.accept_data_loss;
  o.file_system = std::move(options.file_system);
  auto db = storage::Database::Open(std::move(o));
  if (!db.ok()) return db.status();
  return std::unique_ptr<StateDb>(new StateDb(*std::move(db)));
}

absl::StatusOr<StateDb::Contents> StateDb::Load() {
  Contents out;
  auto pin = db_->Pin();
  std::unique_ptr<rocksdb::Iterator> it(db_->db()->NewIterator(rocksdb::ReadOptions()));
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
  if (auto st = db_->ReadError(it->status(), "reading the jobs"); !st.ok()) return st;
  return out;
}

std::string StateDb::JobKey(std::string_view job) {
  return absl::StrFormat("%s%s", kJobPrefix, job);
}

absl::Status StateDb::SetAside(const std::string& key) {
  std::string value;
  {
    auto pin = db_->Pin();
    auto s = db_->db()->Get(rocksdb::ReadOptions(), key, &value);
    if (auto st = db_->ReadError(s, "reading " + key); !st.ok()) return st;
  }
  return db_->Write("setting aside " + key, /*sync=*/true, [&](rocksdb::WriteBatch& batch) {
    batch.Put("bad/" + key, value);
    batch.Delete(key);
  });
}

absl::Status StateDb::PutJob(const herd::v1::JobStatus& job, uint64_t next_node_id, bool sync) {
  return db_->Write("writing job " + job.spec().name(), sync, [&](rocksdb::WriteBatch& batch) {
    batch.Put(absl::StrFormat("%s%s", kJobPrefix, job.spec().name()), job.SerializeAsString());
    if (next_node_id != 0) batch.Put(std::string(kNextNodeId), std::to_string(next_node_id));
  });
}

absl::Status StateDb::PutKv(std::string_view job, std::string_view key, std::string_view value) {
  return db_->Write("writing a store key of job " + std::string(job), /*sync=*/false,
                    [&](rocksdb::WriteBatch& batch) {
                      batch.Put(absl::StrFormat("%s%s/%s", kKvPrefix, job, key),
                                rocksdb::Slice(value.data(), value.size()));
                    });
}

absl::Status StateDb::DeleteKvOfJob(std::string_view job) {
  const std::string begin = absl::StrFormat("%s%s/", kKvPrefix, job);
  const std::string end = absl::StrFormat("%s%s0", kKvPrefix, job);  // '0' follows '/'
  return db_->Write("deleting the store of job " + std::string(job), /*sync=*/false,
                    [&](rocksdb::WriteBatch& batch) { batch.DeleteRange(begin, end); });
}

absl::Status StateDb::DeleteJob(std::string_view job) {
  return db_->Write("deleting job " + std::string(job), /*sync=*/true,
                    [&](rocksdb::WriteBatch& batch) {
                      batch.Delete(absl::StrFormat("%s%s", kJobPrefix, job));
                      batch.DeleteRange(absl::StrFormat("%s%s/", kKvPrefix, job),
                                        absl::StrFormat("%s%s0", kKvPrefix, job));  // '0' > '/'
                    });
}

}  // namespace herd::scheduler
