#include "server/state/shard_store.h"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "common/status.h"

namespace herd::server {
namespace {

enum Cf { kDefault = 0, kParams, kOptimizer, kResidual, kResult, kMeta, kCount };
const char* const kCfNames[kCount] = {"default",  "params", "optimizer",
                                      "residual", "result", "meta"};

void PutBigEndian32(std::string* s, uint32_t v) {
  for (int i = 3; i >= 0; --i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint32_t GetBigEndian32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

std::string Prefix(const std::string& job) { return job + std::string(1, '\0'); }

std::string RowKey(const std::string& job, KeyId key) {
  std::string k = Prefix(job);
  PutBigEndian32(&k, static_cast<uint32_t>(key.tensor));
  PutBigEndian32(&k, static_cast<uint32_t>(key.chunk));
  return k;
}

rocksdb::Slice Floats(std::span<const float> v) {
  return rocksdb::Slice(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// The meta row: the version, then the ps_async clocks, then, only when a worker came back to its
// slot (some base is not zero), the clock bases and this tag. Rows written before the bases
// existed, and rows without any, end with the clocks: they read as bases of zero.
constexpr int64_t kClockBasesTag = 0x53455341424b4c43;  // the bytes "CLKBASES"

template <typename T>
std::vector<T> FromBytes(const std::string& bytes) {
  std::vector<T> v(bytes.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
  return v;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShardStore>> ShardStore::Open(const std::string& dir,
                                                             Options options) {
  storage::DatabaseOptions o;
  o.dir = dir;
  o.what = "the shard state";
  o.column_families.assign(kCfNames + 1, kCfNames + kCount);
  // Values are whole chunks (up to a few MiB): keep them in blob files so compactions move
  // keys, not megabytes of parameters.
  o.cf_options.enable_blob_files = true;
  o.cf_options.min_blob_size = 4096;
  o.cf_options.write_buffer_size = 128 << 20;
  o.accept_data_loss = options.accept_data_loss;
  // A shard killed mid-write restarts; a log cut by hand is caught by its version check.
  o.drop_torn_last_record = true;
  o.file_system = std::move(options.file_system);
  auto store = std::unique_ptr<ShardStore>(new ShardStore());
  store->dir_ = dir;
  HERD_ASSIGN_OR_RETURN(store->db_, storage::Database::Open(std::move(o)));
  return store;
}

ShardStore::~ShardStore() = default;

absl::Status ShardStore::Write(const std::string& job, const KeyRecordView& r) {
  const std::string key = RowKey(job, r.key);
  std::string meta(sizeof(int64_t), '\0');
  std::memcpy(meta.data(), &r.version, sizeof(int64_t));
  meta.append(reinterpret_cast<const char*>(r.clocks.data()), r.clocks.size() * sizeof(int64_t));
  if (std::any_of(r.clock_bases.begin(), r.clock_bases.end(), [](int64_t b) { return b != 0; })) {
    meta.append(reinterpret_cast<const char*>(r.clock_bases.data()),
                r.clock_bases.size() * sizeof(int64_t));
    meta.append(reinterpret_cast<const char*>(&kClockBasesTag), sizeof(int64_t));
  }
  // Through the WAL, not synced: survives a process kill.
  return db_->Write(absl::StrFormat("writing key %s of job '%s'", KeyName(r.key), job),
                    /*sync=*/false, [&](rocksdb::WriteBatch& batch) {
                      // Empty parameters: unchanged since they were last written (ps_ec); keep that
                      // row.
                      if (!r.params.empty()) batch.Put(db_->handle(kParams), key, Floats(r.params));
                      if (!r.slot0.empty() || !r.slot1.empty()) {
                        const rocksdb::Slice key_slice(key);
                        const rocksdb::Slice parts[2] = {Floats(r.slot0), Floats(r.slot1)};
                        batch.Put(db_->handle(kOptimizer), rocksdb::SliceParts(&key_slice, 1),
                                  rocksdb::SliceParts(parts, 2));
                      }
                      if (!r.epsilon.empty())
                        batch.Put(db_->handle(kResidual), key, Floats(r.epsilon));
                      if (!r.result.empty()) {
                        batch.Put(db_->handle(kResult), key,
                                  rocksdb::Slice(r.result.data(), r.result.size()));
                      }
                      batch.Put(db_->handle(kMeta), key, meta);
                    });
}

absl::StatusOr<std::vector<KeyRecord>> ShardStore::Load(const std::string& job) {
  std::vector<KeyRecord> out;
  const std::string prefix = Prefix(job);
  auto pin = db_->Pin();
  std::unique_ptr<rocksdb::Iterator> it(
      db_->db()->NewIterator(rocksdb::ReadOptions(), db_->handle(kMeta)));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    const rocksdb::Slice k = it->key();
    const std::string meta = it->value().ToString();
    if (k.size() != prefix.size() + 8 || meta.size() < sizeof(int64_t) ||
        (meta.size() - sizeof(int64_t)) % sizeof(int64_t) != 0) {
      return absl::DataLossError(
          absl::StrFormat("a state record of job '%s' in %s is malformed", job, dir_));
    }
    KeyRecord r;
    r.key.tensor = static_cast<int32_t>(GetBigEndian32(k.data() + prefix.size()));
    r.key.chunk = static_cast<int32_t>(GetBigEndian32(k.data() + prefix.size() + 4));
    std::memcpy(&r.version, meta.data(), sizeof(int64_t));
    std::vector<int64_t> words = FromBytes<int64_t>(meta.substr(sizeof(int64_t)));
    if (!words.empty() && words.back() == kClockBasesTag) {
      words.pop_back();
      if (words.size() % 2 != 0) {
        return absl::DataLossError(absl::StrFormat(
            "the clocks of key %s of job '%s' in %s are malformed (%d words with their bases)",
            KeyName(r.key), job, dir_, words.size()));
      }
      r.clock_bases.assign(words.begin() + static_cast<std::ptrdiff_t>(words.size() / 2),
                           words.end());
      words.resize(words.size() / 2);
    }
    r.clocks = std::move(words);
    const std::string row = k.ToString();
    std::string value;
    auto get = [&](Cf cf, std::string* v) -> absl::Status {
      v->clear();
      auto st = db_->db()->Get(rocksdb::ReadOptions(), db_->handle(cf), row, v);
      if (st.IsNotFound()) return absl::OkStatus();
      return db_->ReadError(st,
                            absl::StrFormat("reading %s of key %s", kCfNames[cf], KeyName(r.key)));
    };
    HERD_RETURN_IF_ERROR(get(kParams, &value));
    r.params = FromBytes<float>(value);
    HERD_RETURN_IF_ERROR(get(kOptimizer, &value));
    auto slots = FromBytes<float>(value);
    HERD_RETURN_IF_ERROR(get(kResidual, &value));
    r.epsilon = FromBytes<float>(value);
    HERD_RETURN_IF_ERROR(get(kResult, &r.result));
    // The optimizer row holds slot0 then slot1, each of the parameters' length.
    const size_t n = r.params.size();
    if (slots.size() == n) {
      r.slot0 = std::move(slots);
    } else if (slots.size() == 2 * n && n > 0) {
      r.slot0.assign(slots.begin(), slots.begin() + n);
      r.slot1.assign(slots.begin() + n, slots.end());
    } else if (!slots.empty()) {
      return absl::DataLossError(
          absl::StrFormat("optimizer state of key %s of job '%s' has %d values for %d parameters",
                          KeyName(r.key), job, slots.size(), n));
    }
    out.push_back(std::move(r));
  }
  HERD_RETURN_IF_ERROR(db_->ReadError(it->status(), "reading the keys of job '" + job + "'"));
  return out;
}

}  // namespace herd::server
