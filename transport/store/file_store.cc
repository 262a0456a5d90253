// A Store in a directory: each key is a file, written to a temporary name and renamed, so a
// reader sees either nothing or the whole value. Processes on one machine (or sharing a volume)
// bootstrap through it.

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "transport/store/store.h"

namespace herd::transport {
namespace {

namespace fs = std::filesystem;

class FileStore final : public Store {
 public:
  explicit FileStore(fs::path dir) : dir_(std::move(dir)) {}

  absl::Status Set(std::string_view key, std::string_view value) override {
    const fs::path final_path = PathOf(key);
    const fs::path tmp = final_path.string() +
                         absl::StrCat(".tmp.", ::getpid(), ".",
                                      std::hash<std::thread::id>()(std::this_thread::get_id()));
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(value.data(), static_cast<std::streamsize>(value.size()));
      out.flush();
      if (!out) return absl::InternalError(absl::StrCat("cannot write ", tmp.string()));
    }
    // link() fails if the key exists: a key is written once, atomically.
    if (::link(tmp.c_str(), final_path.c_str()) != 0) {
      int err = errno;
      fs::remove(tmp);
      if (err == EEXIST) {
        return absl::AlreadyExistsError(
            absl::StrFormat("store key '%s' is already set in %s", key, dir_.string()));
      }
      return absl::InternalError(
          absl::StrCat("cannot publish ", final_path.string(), ": ", std::strerror(err)));
    }
    fs::remove(tmp);
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> Get(std::string_view key, Deadline deadline) override {
    const fs::path path = PathOf(key);
    auto pause = std::chrono::microseconds(200);
    while (true) {
      std::ifstream in(path, std::ios::binary);
      if (in) {
        std::ostringstream ss;
        ss << in.rdbuf();
        return ss.str();
      }
      if (deadline.expired()) {
        return absl::DeadlineExceededError(absl::StrFormat(
            "store key '%s' did not appear in %s before the deadline", key, dir_.string()));
      }
      std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(pause, deadline.remaining()));
      pause = std::min(pause * 2, std::chrono::microseconds(20000));
    }
  }

 private:
  fs::path PathOf(std::string_view key) const {
    // Keys may contain '/', which would name folders: flatten them.
    return dir_ / absl::StrReplaceAll(std::string(key), {{"/", "%2F"}});
  }
  fs::path dir_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<Store>> MakeFileStore(std::string dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create store directory ", dir, ": ", ec.message()));
  return std::shared_ptr<Store>(std::make_shared<FileStore>(fs::path(dir)));
}

}  // namespace herd::transport
