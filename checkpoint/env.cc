#include "checkpoint/env.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_format.h"

namespace herd::checkpoint {

absl::Status ErrnoToStatus(int err, std::string_view op, std::string_view path) {
  const std::string what = absl::StrFormat("%s %s: %s", op, path, std::strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(what);
    case EEXIST:
    case ENOTEMPTY:
      return absl::AlreadyExistsError(what);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(what);
    case EROFS:
    case ENOTDIR:
    case EISDIR:
      return absl::FailedPreconditionError(what);
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(what);
    default:
      return absl::InternalError(what);
  }
}

std::string JoinPath(std::string_view dir, std::string_view name) {
  if (dir.empty()) return std::string(name);
  if (dir.back() == '/') return absl::StrFormat("%s%s", dir, name);
  return absl::StrFormat("%s/%s", dir, name);
}

absl::Status NotRegular(std::string_view path, uint32_t mode) {
  const char* what = S_ISDIR(mode)    ? "a directory"
                     : S_ISFIFO(mode) ? "a FIFO"
                     : S_ISSOCK(mode) ? "a socket"
                     : S_ISCHR(mode)  ? "a character device"
                     : S_ISBLK(mode)  ? "a block device"
                     : S_ISLNK(mode)  ? "a symbolic link"
                                      : "not a file";
  return absl::FailedPreconditionError(absl::StrFormat(
      "%s is not a regular file (%s): checkpoints are made of regular files only", path, what));
}

absl::StatusOr<std::string> Env::ReadFile(const std::string& path, uint64_t max_bytes) {
  auto file = NewRandomAccessFile(path);
  if (!file.ok()) return file.status();
  if ((*file)->size() > max_bytes) {
    return absl::DataLossError(absl::StrFormat("%s has %d bytes, more than the %d such a file has",
                                               path, (*file)->size(), max_bytes));
  }
  std::string data((*file)->size(), '\0');
  absl::Status s = (*file)->Read(0, data.size(), data.data());
  if (!s.ok()) return s;
  return data;
}

absl::Status Env::WriteFile(const std::string& path, std::string_view data) {
  auto file = NewWritableFile(path);
  if (!file.ok()) return file.status();
  absl::Status s = (*file)->Append(data);
  if (s.ok()) s = (*file)->Sync();
  absl::Status c = (*file)->Close();
  return s.ok() ? c : s;
}

bool Env::Exists(const std::string& path) { return Stat(path).ok(); }

namespace {

// Retries a call interrupted by a signal.
template <typename F>
auto RetryEintr(F f) {
  decltype(f()) r;
  do {
    r = f();
  } while (r < 0 && errno == EINTR);
  return r;
}

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }
  absl::Status Append(std::string_view data) override {
    while (!data.empty()) {
      const ssize_t n = RetryEintr([&] { return ::write(fd_, data.data(), data.size()); });
      if (n < 0) return ErrnoToStatus(errno, "write", path_);
      data.remove_prefix(static_cast<size_t>(n));
    }
    return absl::OkStatus();
  }
  absl::Status Sync() override {
    if (::fsync(fd_) != 0) return ErrnoToStatus(errno, "fsync", path_);
    return absl::OkStatus();
  }
  absl::Status Close() override {
    const int fd = fd_;
    fd_ = -1;
    if (fd >= 0 && ::close(fd) != 0) return ErrnoToStatus(errno, "close", path_);
    return absl::OkStatus();
  }

 private:
  std::string path_;
  int fd_;
};

class PosixRandomAccessFile final : public RandomAccessFile {
 public:
  PosixRandomAccessFile(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  ~PosixRandomAccessFile() override { ::close(fd_); }
  absl::Status Read(uint64_t offset, size_t n, char* out) const override {
    size_t done = 0;
    while (done < n) {
      const ssize_t r = RetryEintr(
          [&] { return ::pread(fd_, out + done, n - done, static_cast<off_t>(offset + done)); });
      if (r < 0) return ErrnoToStatus(errno, "read", path_);
      if (r == 0) {
        return absl::DataLossError(
            absl::StrFormat("%s is truncated: %d bytes at offset %d asked, the file has %d", path_,
                            n, offset, offset + done));
      }
      done += static_cast<size_t>(r);
    }
    return absl::OkStatus();
  }
  uint64_t size() const override { return size_; }

 private:
  std::string path_;
  int fd_;
  uint64_t size_;
};

// OK when `fd` is a regular file (then in blocking mode again); closes it otherwise.
absl::Status CheckOpened(int fd, const std::string& path) {
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoToStatus(err, "stat", path);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return NotRegular(path, st.st_mode);
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return absl::OkStatus();
}

class PosixEnvImpl final : public Env {
 public:
  // Checkpoints hold the model and every process's state: the directories this creates are
  // its owner's only (0700, files 0600), as the scheduler's and the shards' state directories.
  absl::Status CreateDirs(const std::string& path) override {
    std::string prefix;
    for (const std::filesystem::path& part : std::filesystem::path(path)) {
      prefix =
          prefix.empty() || prefix == "/" ? prefix + part.string() : prefix + "/" + part.string();
      if (part.empty() || part == "/" || part == "." || part == "..") continue;
      if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
        return ErrnoToStatus(errno, "mkdir", prefix);
      }
    }
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return ErrnoToStatus(errno, "stat", path);
    if (!S_ISDIR(st.st_mode)) return ErrnoToStatus(ENOTDIR, "mkdir", path);
    return absl::OkStatus();
  }

  // Special files are refused by their stat before any open (opening some devices acts), and
  // so are symbolic links in the file's own name (lstat, O_NOFOLLOW): a link planted in a
  // checkpoint directory would make a writer overwrite, or a reader read and checksum, a
  // file outside it. Links in the directories above are the operator's and are followed.
  // The open itself never blocks (O_NONBLOCK: a FIFO without a writer, or without a reader for
  // writing, answers at once); what was opened is checked again (it may have been swapped).
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    struct stat before;
    if (::lstat(path.c_str(), &before) == 0 && !S_ISREG(before.st_mode)) {
      return NotRegular(path, before.st_mode);
    }
    const int fd = RetryEintr([&] {
      return ::open(path.c_str(),
                    O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW,
                    0600);
    });
    if (fd < 0) return ErrnoToStatus(errno, "open", path);
    if (absl::Status s = CheckOpened(fd, path); !s.ok()) return s;
    return std::make_unique<PosixWritableFile>(path, fd);
  }

  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override {
    struct stat before;
    if (::lstat(path.c_str(), &before) != 0) return ErrnoToStatus(errno, "stat", path);
    if (!S_ISREG(before.st_mode)) return NotRegular(path, before.st_mode);
    const int fd = RetryEintr([&] {
      return ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW);
    });
    if (fd < 0) return ErrnoToStatus(errno, "open", path);
    if (absl::Status s = CheckOpened(fd, path); !s.ok()) return s;
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      return ErrnoToStatus(err, "stat", path);
    }
    return std::make_unique<PosixRandomAccessFile>(path, fd, static_cast<uint64_t>(st.st_size));
  }

  absl::Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return ErrnoToStatus(errno, "rename", from + " -> " + to);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) override {
    DIR* d = ::opendir(path.c_str());
    if (d == nullptr) return ErrnoToStatus(errno, "opendir", path);
    std::vector<std::string> names;
    errno = 0;
    while (dirent* e = ::readdir(d)) {
      const std::string_view name = e->d_name;
      if (name != "." && name != "..") names.emplace_back(name);
    }
    const int err = errno;
    ::closedir(d);
    if (err != 0) return ErrnoToStatus(err, "readdir", path);
    std::sort(names.begin(), names.end());
    return names;
  }

  absl::Status RemoveAll(const std::string& path) override {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
    if (ec) return ErrnoToStatus(ec.value(), "remove", path);
    return absl::OkStatus();
  }

  absl::Status SyncDir(const std::string& path) override {
    const int fd =
        RetryEintr([&] { return ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); });
    if (fd < 0) return ErrnoToStatus(errno, "open", path);
    const int r = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    if (r != 0) return ErrnoToStatus(err, "fsync", path);
    return absl::OkStatus();
  }

  absl::StatusOr<FileInfo> Stat(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return ErrnoToStatus(errno, "stat", path);
    return FileInfo{.is_dir = S_ISDIR(st.st_mode),
                    .is_regular = S_ISREG(st.st_mode),
                    .size = static_cast<uint64_t>(st.st_size)};
  }

  absl::StatusOr<uint64_t> FreeBytes(const std::string& path) override {
    struct statvfs vfs;
    if (::statvfs(path.c_str(), &vfs) != 0) return ErrnoToStatus(errno, "statvfs", path);
    return static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  }
};

}  // namespace

Env& PosixEnv() {
  static PosixEnvImpl* env = new PosixEnvImpl();
  return *env;
}

}  // namespace herd::checkpoint
