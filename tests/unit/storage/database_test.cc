// The storage rules every herd database follows (storage/database.h), on a real RocksDB:
// owner-only files, failed writes (full disk, I/O error, read-only) refused with UNAVAILABLE
// while reads go on and recovered once the disk is back, and damaged write-ahead logs refused
// with DATA_LOSS unless the loss is accepted.

#include "storage/database.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "storage/fault_file_system.h"

namespace herd::storage {
namespace {

namespace fs = std::filesystem;

class DatabaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("herd_storage_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  DatabaseOptions Options(bool accept_data_loss = false) {
    DatabaseOptions o;
    o.dir = dir_.string();
    o.what = "the test state";
    o.column_families = {"data"};
    o.accept_data_loss = accept_data_loss;
    o.file_system = faults_;
    o.retry_every = std::chrono::milliseconds(0);
    return o;
  }
  std::unique_ptr<Database> Open(bool accept_data_loss = false) {
    auto db = Database::Open(Options(accept_data_loss));
    EXPECT_TRUE(db.ok()) << db.status();
    return db.ok() ? *std::move(db) : nullptr;
  }
  static absl::Status Put(Database& db, const std::string& k, const std::string& v) {
    return db.Write("writing " + k, /*sync=*/false,
                    [&](rocksdb::WriteBatch& batch) { batch.Put(db.handle(1), k, v); });
  }
  static std::string Get(Database& db, const std::string& k) {
    std::string v;
    auto pin = db.Pin();
    auto st = db.db()->Get(rocksdb::ReadOptions(), db.handle(1), k, &v);
    return st.ok() ? v : "<" + st.ToString() + ">";
  }
  // The write-ahead log files of the database (RocksDB names them NNNNNN.log).
  std::vector<fs::path> Logs() const {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().extension() == ".log" && fs::file_size(e.path()) > 0) out.push_back(e.path());
    }
    return out;
  }

  fs::path dir_;
  std::shared_ptr<FaultFileSystem> faults_ = std::make_shared<FaultFileSystem>();
};

TEST_F(DatabaseTest, DirectoryAndFilesAreOwnerOnly) {
  fs::create_directories(dir_);
  fs::permissions(dir_, fs::perms::all);  // an older herd's, or a restored copy
  std::ofstream(dir_ / "stray") << "x";
  fs::permissions(dir_ / "stray", fs::perms::owner_read | fs::perms::others_read);
  {
    auto db = Open();
    ASSERT_TRUE(Put(*db, "k", "v").ok());
  }
  auto db = Open();  // a second open writes new files (a new log, a MANIFEST)
  ASSERT_TRUE(Put(*db, "k2", "v").ok());
  EXPECT_EQ(fs::status(dir_).permissions() & fs::perms::all, fs::perms::owner_all);
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir_)) {
    if (!e.is_regular_file()) continue;
    ++files;
    EXPECT_EQ(e.status().permissions() & (fs::perms::group_all | fs::perms::others_all),
              fs::perms::none)
        << e.path();
  }
  EXPECT_GT(files, 3);
}

class DiskFaultTest : public DatabaseTest, public ::testing::WithParamInterface<Fault> {};

TEST_P(DiskFaultTest, AFailedWriteIsUnavailableReadsGoOnAndTheDiskComingBackRecovers) {
  auto db = Open();
  ASSERT_TRUE(Put(*db, "a", "1").ok());
  faults_->Fail(GetParam());
  const absl::Status failed = Put(*db, "b", "2");
  ASSERT_TRUE(absl::IsUnavailable(failed)) << failed;
  EXPECT_NE(failed.message().find("(injected)"), std::string::npos) << failed;  // the cause
  EXPECT_NE(failed.message().find(dir_.string()), std::string::npos) << failed;
  EXPECT_NE(failed.message().find("writing b"), std::string::npos) << failed;
  // Refused from now on, and nothing of the refused write is visible; reads still work.
  EXPECT_TRUE(absl::IsUnavailable(db->Writable()));
  EXPECT_TRUE(absl::IsUnavailable(Put(*db, "c", "3")));
  EXPECT_EQ(Get(*db, "a"), "1");
  EXPECT_EQ(Get(*db, "b").front(), '<');

  faults_->Fail(Fault::kNone);
  ASSERT_TRUE(db->Writable().ok());
  ASSERT_TRUE(Put(*db, "d", "4").ok());
  db.reset();
  // A restart sees everything acknowledged and nothing refused; the log the failed write may
  // have torn does not make the open refuse the state.
  db = Open();
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(Get(*db, "a"), "1");
  EXPECT_EQ(Get(*db, "d"), "4");
  EXPECT_EQ(Get(*db, "b").front(), '<');
  EXPECT_EQ(Get(*db, "c").front(), '<');
}

TEST_P(DiskFaultTest, AFailedSyncedWriteIsUnavailableToo) {
  auto db = Open();
  faults_->Fail(GetParam());
  auto put = [&](rocksdb::WriteBatch& batch) { batch.Put(db->handle(1), "s", "1"); };
  EXPECT_TRUE(absl::IsUnavailable(db->Write("a synced write", /*sync=*/true, put)));
  faults_->Fail(Fault::kNone);
  EXPECT_TRUE(db->Writable().ok());
  EXPECT_TRUE(db->Write("a synced write", /*sync=*/true, put).ok());
  EXPECT_EQ(Get(*db, "s"), "1");
}

INSTANTIATE_TEST_SUITE_P(Faults, DiskFaultTest,
                         ::testing::Values(Fault::kNoSpace, Fault::kIoError, Fault::kReadOnly));

TEST_F(DatabaseTest, OpeningOnAFailingDiskIsAnErrorNotAnAbort) {
  faults_->Fail(Fault::kReadOnly);
  auto db = Database::Open(Options());
  ASSERT_FALSE(db.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(db.status())) << db.status();
}

// Writes 20 values, closes, and damages the write-ahead log with `damage(path, size)`.
class WalDamageTest : public DatabaseTest {
 protected:
  template <typename Damage>
  fs::path WriteAndDamage(Damage damage) {
    {
      auto db = Open();
      for (int i = 0; i < 20; ++i) {
        EXPECT_TRUE(Put(*db, "k" + std::to_string(i), std::string(100, 'a' + i % 26)).ok());
      }
    }
    auto logs = Logs();
    EXPECT_EQ(logs.size(), 1u);
    if (logs.empty()) return {};
    damage(logs[0], fs::file_size(logs[0]));
    return logs[0];
  }
  void ExpectRefusedThenAccepted(const fs::path& log) {
    auto refused = Database::Open(Options());
    ASSERT_FALSE(refused.ok());
    EXPECT_TRUE(absl::IsDataLoss(refused.status())) << refused.status();
    EXPECT_NE(refused.status().message().find(log.filename().string()), std::string::npos)
        << refused.status();
    EXPECT_NE(refused.status().message().find("--accept-data-loss"), std::string::npos);
    // The refused open changed nothing: refused again.
    EXPECT_TRUE(absl::IsDataLoss(Database::Open(Options()).status()));
    // The operator accepts the loss: the values before the damage are there.
    auto db = Open(/*accept_data_loss=*/true);
    ASSERT_NE(db, nullptr);
    EXPECT_EQ(Get(*db, "k0"), std::string(100, 'a'));
    EXPECT_EQ(Get(*db, "k19").front(), '<');
  }
};

TEST_F(WalDamageTest, FlippedBytesAreDataLoss) {
  const fs::path log = WriteAndDamage([](const fs::path& p, uintmax_t size) {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size * 3 / 4));
    f.put('\xff').put('\x00').put('\x5a');
  });
  ExpectRefusedThenAccepted(log);
}

TEST_F(WalDamageTest, ATruncatedLogIsDataLoss) {
  const fs::path log = WriteAndDamage(
      [](const fs::path& p, uintmax_t size) { fs::resize_file(p, size - size / 5 - 7); });
  ExpectRefusedThenAccepted(log);
}

// A process killed while RocksDB wrote its last record leaves that record incomplete. A shard
// (drop_torn_last_record; its version check catches a log cut by hand) opens without that
// never-acknowledged write; every other database refuses, as for any truncation.
TEST_F(WalDamageTest, ATornLastRecordIsDroppedOnlyWhereAskedFor) {
  {
    auto db = Open();
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(Put(*db, "k" + std::to_string(i), "small").ok());
    ASSERT_TRUE(Put(*db, "big", std::string(300 << 10, 'b')).ok());
  }
  auto logs = Logs();
  ASSERT_EQ(logs.size(), 1u);
  fs::resize_file(logs[0], fs::file_size(logs[0]) - 1000);  // inside the big record
  EXPECT_TRUE(absl::IsDataLoss(Database::Open(Options()).status()));
  DatabaseOptions o = Options();
  o.drop_torn_last_record = true;
  auto db = Database::Open(o);
  ASSERT_TRUE(db.ok()) << db.status();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Get(**db, "k" + std::to_string(i)), "small");
  EXPECT_EQ(Get(**db, "big").front(), '<');  // the torn write is not there
}

TEST_F(WalDamageTest, AnUndamagedLogOpens) {
  WriteAndDamage([](const fs::path&, uintmax_t) {});
  auto db = Open();
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(Get(*db, "k19"), std::string(100, 'a' + 19));
}

}  // namespace
}  // namespace herd::storage
