#pragma once
// A fresh directory (for the bootstrap stores of rank processes, scratch state), removed with
// everything in it when the object goes away.

#include <string>

#include "absl/status/statusor.h"

namespace herd {

class TempDir {
 public:
  // Under $TMPDIR (or /tmp), named <stem>-XXXXXX.
  static absl::StatusOr<TempDir> Create(const std::string& stem);
  TempDir(TempDir&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  TempDir& operator=(TempDir&&) = delete;
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  explicit TempDir(std::string p) : path_(std::move(p)) {}
  std::string path_;
};

}  // namespace herd
