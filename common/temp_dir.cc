#include "common/temp_dir.h"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_format.h"

namespace herd {

absl::StatusOr<TempDir> TempDir::Create(const std::string& stem) {
  const char* base = std::getenv("TMPDIR");
  std::string templ = absl::StrFormat("%s/%s-XXXXXX", base && *base ? base : "/tmp", stem);
  if (mkdtemp(templ.data()) == nullptr) {
    return absl::InternalError(
        absl::StrFormat("cannot create a temporary directory %s: %s", templ, strerror(errno)));
  }
  return TempDir(templ);
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

}  // namespace herd
