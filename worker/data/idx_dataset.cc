#include "worker/data/idx_dataset.h"

#include <zlib.h>

#include <algorithm>

#include "absl/strings/str_format.h"

namespace herd::worker {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // unsigned byte, 3 dimensions
constexpr uint32_t kLabelsMagic = 0x00000801;  // unsigned byte, 1 dimension
constexpr int kClasses = 10;
// Bounds that keep a corrupt header from asking for absurd allocations.
constexpr uint32_t kMaxCount = 10'000'000;
constexpr uint32_t kMaxSide = 4096;

// The whole decompressed file.
absl::StatusOr<std::string> ReadGzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) {
    return absl::NotFoundError(absl::StrFormat(
        "cannot open %s; install the Debian package dataset-fashion-mnist "
        "(scripts/install-deps.sh does) or pass --data-dir", path));
  }
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const int n = gzread(f, buf, sizeof buf);
    if (n < 0) {
      int err = 0;
      std::string why = gzerror(f, &err);
      gzclose(f);
      return absl::DataLossError(absl::StrFormat("%s is not a valid gzip file: %s", path, why));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > (size_t{1} << 31)) {
      gzclose(f);
      return absl::DataLossError(absl::StrFormat("%s decompresses to more than 2 GiB", path));
    }
  }
  gzclose(f);
  return out;
}

uint32_t BigEndian32(const std::string& s, size_t at) {
  return (uint32_t{static_cast<uint8_t>(s[at])} << 24) |
         (uint32_t{static_cast<uint8_t>(s[at + 1])} << 16) |
         (uint32_t{static_cast<uint8_t>(s[at + 2])} << 8) | uint32_t{static_cast<uint8_t>(s[at + 3])};
}

}  // namespace

absl::StatusOr<ImageDataset> LoadIdxDataset(const std::string& dir, const std::string& prefix) {
  const std::string images_path = absl::StrFormat("%s/%s-images-idx3-ubyte.gz", dir, prefix);
  const std::string labels_path = absl::StrFormat("%s/%s-labels-idx1-ubyte.gz", dir, prefix);
  std::string images, labels;
  {
    auto r = ReadGzip(images_path);
    if (!r.ok()) return r.status();
    images = std::move(*r);
  }
  {
    auto r = ReadGzip(labels_path);
    if (!r.ok()) return r.status();
    labels = std::move(*r);
  }
  if (images.size() < 16 || BigEndian32(images, 0) != kImagesMagic) {
    return absl::DataLossError(
        absl::StrFormat("%s is not an IDX image file (bad header)", images_path));
  }
  if (labels.size() < 8 || BigEndian32(labels, 0) != kLabelsMagic) {
    return absl::DataLossError(
        absl::StrFormat("%s is not an IDX label file (bad header)", labels_path));
  }
  const uint32_t count = BigEndian32(images, 4), rows = BigEndian32(images, 8),
                 cols = BigEndian32(images, 12);
  if (count > kMaxCount || rows == 0 || cols == 0 || rows > kMaxSide || cols > kMaxSide) {
    return absl::DataLossError(absl::StrFormat("%s declares %d images of %dx%d: not plausible",
                                               images_path, count, rows, cols));
  }
  if (BigEndian32(labels, 4) != count) {
    return absl::DataLossError(absl::StrFormat("%s has %d images but %s has %d labels",
                                               images_path, count, labels_path,
                                               BigEndian32(labels, 4)));
  }
  const size_t pixels = size_t{count} * rows * cols;
  if (images.size() != 16 + pixels) {
    return absl::DataLossError(absl::StrFormat("%s should hold %d bytes of pixels, holds %d",
                                               images_path, pixels, images.size() - 16));
  }
  if (labels.size() != 8 + size_t{count}) {
    return absl::DataLossError(absl::StrFormat("%s should hold %d labels, holds %d", labels_path,
                                               count, labels.size() - 8));
  }
  ImageDataset d;
  d.count = count;
  d.rows = static_cast<int>(rows);
  d.cols = static_cast<int>(cols);
  d.images.resize(pixels);
  for (size_t i = 0; i < pixels; ++i) {
    d.images[i] = static_cast<float>(static_cast<uint8_t>(images[16 + i])) / 255.0f;
  }
  d.labels.resize(count);
  for (uint32_t i = 0; i < count; ++i) {
    const int label = static_cast<uint8_t>(labels[8 + i]);
    if (label >= kClasses) {
      return absl::DataLossError(
          absl::StrFormat("%s: label %d of sample %d is not a class (0..9)", labels_path, label, i));
    }
    d.labels[i] = label;
  }
  return d;
}

}  // namespace herd::worker
