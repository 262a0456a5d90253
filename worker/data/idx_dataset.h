#pragma once
// Image-classification datasets in the IDX format of MNIST and Fashion-MNIST (gzip-compressed
// files as the Debian package `dataset-fashion-mnist` installs them in
// /usr/share/datasets/fashion-mnist/). Images become fp32 in [0, 1]; labels int64.
//
// Every byte of a file is validated: magic numbers, dimensions, that the image and label files
// agree on the count, that no label exceeds the class count, and that the file is complete.
// A missing or corrupt file is an error that names it and says what is wrong.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace herd::worker {

struct ImageDataset {
  int64_t count = 0;
  int rows = 0;
  int cols = 0;
  std::vector<float> images;    // count x rows x cols, in [0, 1]
  std::vector<int64_t> labels;  // count, in [0, 10)
};

// The directory of the Debian package.
inline constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

// Reads `<dir>/<prefix>-images-idx3-ubyte.gz` and `<dir>/<prefix>-labels-idx1-ubyte.gz`;
// prefix "train" (60000 images) or "t10k" (10000, the test set).
absl::StatusOr<ImageDataset> LoadIdxDataset(const std::string& dir, const std::string& prefix);

}  // namespace herd::worker
