#include "worker/data/idx_dataset.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace herd::worker {
namespace {

namespace fs = std::filesystem;

std::string Be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

class IdxDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "herd-idx-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
  }
  void TearDown() override { fs::remove_all(dir_); }

  void WriteGz(const std::string& name, const std::string& bytes) {
    gzFile f = gzopen((dir_ + "/" + name).c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
    gzclose(f);
  }
  // `count` images of 2x3 whose pixel j of image i is 10 i + j; labels i % 10.
  void WriteValid(const std::string& prefix, uint32_t count) {
    std::string images = Be32(0x803) + Be32(count) + Be32(2) + Be32(3);
    for (uint32_t i = 0; i < count; ++i) {
      for (int j = 0; j < 6; ++j) images.push_back(static_cast<char>(10 * i + j));
    }
    std::string labels = Be32(0x801) + Be32(count);
    for (uint32_t i = 0; i < count; ++i) labels.push_back(static_cast<char>(i % 10));
    WriteGz(prefix + "-images-idx3-ubyte.gz", images);
    WriteGz(prefix + "-labels-idx1-ubyte.gz", labels);
  }

  std::string dir_;
};

TEST_F(IdxDatasetTest, ReadsImagesScaledToUnitRangeAndLabels) {
  WriteValid("train", 5);
  auto d = LoadIdxDataset(dir_, "train");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->count, 5);
  EXPECT_EQ(d->rows, 2);
  EXPECT_EQ(d->cols, 3);
  ASSERT_EQ(d->images.size(), 30u);
  EXPECT_FLOAT_EQ(d->images[6 * 4 + 5], 45.0f / 255.0f);
  EXPECT_EQ(d->labels[3], 3);
}

TEST_F(IdxDatasetTest, AMissingFileNamesItAndThePackage) {
  auto d = LoadIdxDataset(dir_, "train");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(d.status().message().find("train-images-idx3-ubyte.gz"), std::string::npos);
  EXPECT_NE(d.status().message().find("dataset-fashion-mnist"), std::string::npos);
}

TEST_F(IdxDatasetTest, CorruptFilesAreRefusedWithTheReason) {
  struct Case {
    std::string images, labels, expect;
  };
  const std::string good_labels = Be32(0x801) + Be32(1) + std::string(1, '\3');
  const std::string header = Be32(0x803) + Be32(1) + Be32(2) + Be32(3);
  const std::vector<Case> cases = {
      {Be32(0x999) + Be32(1) + Be32(2) + Be32(3) + std::string(6, 'x'), good_labels, "bad header"},
      {header + std::string(5, 'x'), good_labels, "should hold 6 bytes"},
      {header + std::string(6, 'x'), Be32(0x801) + Be32(2) + "\1\2", "has 1 images but"},
      {header + std::string(6, 'x'), Be32(0x801) + Be32(1) + "\12", "is not a class"},
      {Be32(0x803) + Be32(1) + Be32(0) + Be32(3), good_labels, "not plausible"},
      {"abc", good_labels, "bad header"},
  };
  for (const Case& c : cases) {
    WriteGz("t10k-images-idx3-ubyte.gz", c.images);
    WriteGz("t10k-labels-idx1-ubyte.gz", c.labels);
    auto d = LoadIdxDataset(dir_, "t10k");
    ASSERT_FALSE(d.ok()) << c.expect;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kDataLoss) << d.status();
    EXPECT_NE(d.status().message().find(c.expect), std::string::npos) << d.status();
  }
}

}  // namespace
}  // namespace herd::worker
