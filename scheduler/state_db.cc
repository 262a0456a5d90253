#include "scheduler/state_db.h"

#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <charconv>
#include <chrono>
#include <optional>

#include "absl/strings/str_format.h"

namespace herd::scheduler {
namespace {

constexpr std::string_view kJobPrefix = "job/";
constexpr std::string_view kKvPrefix = "kv/";
constexpr std::string_view kNextNodeId = "meta/next_node_id";
constexpr std::string_view kStateSeq = "meta/state_seq";
constexpr std::string_view kLost = "meta/lost";

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// A decimal counter; nullopt when it does not parse.
std::optional<uint64_t> ParseCounter(std::string_view v) {
  uint64_t n = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || p != v.data() + v.size()) return std::nullopt;
  return n;
}

uint64_t NowMicros() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace

StateDb::StateDb(std::unique_ptr<storage::Database> db, uint64_t recovered_seq)
    : db_(std::move(db)), dir_(db_->dir()), sequence_(recovered_seq, NowMicros()) {}

StateDb::~StateDb() = default;

absl::StatusOr<std::unique_ptr<StateDb>> StateDb::Open(const std::string& dir, Options options) {
  storage::DatabaseOptions o;
  o.dir = dir;
  o.what = "the scheduler state";
  // The state is small (jobs and membership): keep RocksDB's footprint small too.
  o.db_options.max_background_jobs = 1;
  o.db_options.keep_log_file_num = 2;
  o.accept_data_loss = options.accept_data_loss;
  // A log whose last record is incomplete (the scheduler killed while a write was cut short,
  // on a full disk the write it refused) opens without it: that write was never acknowledged.
  // Whether the record was one a process had heard about is for the witnesses to say
  // (state_sequence.h): the state sequence of every acknowledged write reached a process of the
  // job, and a process that heard a number the recovered state lacks refuses it (witness.cc).
  o.drop_torn_last_record = true;
  o.file_system = std::move(options.file_system);
  auto db = storage::Database::Open(std::move(o));
  if (!db.ok()) return db.status();
  std::string seq;
  {
    auto pin = (*db)->Pin();
    rocksdb::Status s = (*db)->db()->Get(rocksdb::ReadOptions(), std::string(kStateSeq), &seq);
    if (s.IsNotFound()) {
      seq = "0";  // a new state, or one written before the sequence existed
    } else if (auto st = (*db)->ReadError(s, "reading the state sequence"); !st.ok()) {
      return st;
    }
  }
  std::optional<uint64_t> recovered = ParseCounter(seq);
  if (!recovered.has_value()) {
    if (!options.accept_data_loss) {
      return absl::DataLossError(absl::StrFormat(
          "the scheduler state in %s is damaged: its state sequence '%s' is not a number; "
          "restart with --accept-data-loss to start from what is there",
          dir, seq.substr(0, 40)));
    }
    recovered = 0;  // no witness can then prove a loss: accepted
  }
  return std::unique_ptr<StateDb>(new StateDb(*std::move(db), *recovered));
}

absl::Status StateDb::Write(std::string_view what, bool sync,
                            absl::FunctionRef<void(rocksdb::WriteBatch&)> fill) {
  if (!fence_.ok()) return fence_;
  const std::string seq = std::to_string(sequence_.next());
  absl::Status st = db_->Write(what, sync, [&](rocksdb::WriteBatch& batch) {
    fill(batch);
    batch.Put(std::string(kStateSeq), seq);
  });
  if (!st.ok()) return st;
  sequence_.Advance();
  return absl::OkStatus();
}

absl::Status StateDb::MarkLost(std::string_view why) {
  return Write("recording that the state lost acknowledged writes", /*sync=*/true,
               [&](rocksdb::WriteBatch& batch) {
                 batch.Put(std::string(kLost), rocksdb::Slice(why.data(), why.size()));
               });
}

absl::Status StateDb::ClearLost() {
  return Write("clearing the record of lost writes", /*sync=*/true,
               [&](rocksdb::WriteBatch& batch) { batch.Delete(std::string(kLost)); });
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
      // A bad counter is recomputed from the members by the caller.
      out.next_node_id = ParseCounter(value.ToStringView()).value_or(0);
    } else if (key == kLost) {
      out.lost = value.ToString();
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
  return Write("setting aside " + key, /*sync=*/true, [&](rocksdb::WriteBatch& batch) {
    batch.Put("bad/" + key, value);
    batch.Delete(key);
  });
}

absl::Status StateDb::PutJob(const herd::v1::JobStatus& job, uint64_t next_node_id, bool sync) {
  return Write("writing job " + job.spec().name(), sync, [&](rocksdb::WriteBatch& batch) {
    batch.Put(absl::StrFormat("%s%s", kJobPrefix, job.spec().name()), job.SerializeAsString());
    if (next_node_id != 0) batch.Put(std::string(kNextNodeId), std::to_string(next_node_id));
  });
}

absl::Status StateDb::PutKv(std::string_view job, std::string_view key, std::string_view value) {
  return Write("writing a store key of job " + std::string(job), /*sync=*/false,
               [&](rocksdb::WriteBatch& batch) {
                 batch.Put(absl::StrFormat("%s%s/%s", kKvPrefix, job, key),
                           rocksdb::Slice(value.data(), value.size()));
               });
}

absl::Status StateDb::DeleteKvOfJob(std::string_view job) {
  const std::string begin = absl::StrFormat("%s%s/", kKvPrefix, job);
  const std::string end = absl::StrFormat("%s%s0", kKvPrefix, job);  // '0' follows '/'
  return Write("deleting the store of job " + std::string(job), /*sync=*/false,
               [&](rocksdb::WriteBatch& batch) { batch.DeleteRange(begin, end); });
}

absl::Status StateDb::DeleteJob(std::string_view job) {
  return Write("deleting job " + std::string(job), /*sync=*/true, [&](rocksdb::WriteBatch& batch) {
    batch.Delete(absl::StrFormat("%s%s", kJobPrefix, job));
    batch.DeleteRange(absl::StrFormat("%s%s/", kKvPrefix, job),
                      absl::StrFormat("%s%s0", kKvPrefix, job));  // '0' > '/'
  });
}

}  // namespace herd::scheduler
