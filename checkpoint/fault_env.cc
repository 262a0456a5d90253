#include "checkpoint/fault_env.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_format.h"

namespace herd::checkpoint {
namespace {

std::string Parent(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

bool Under(const std::string& path, const std::string& dir) {
  return path == dir || path.starts_with(dir + "/");
}

}  // namespace

class FaultInjectionEnv::File final : public WritableFile {
 public:
  File(FaultInjectionEnv& env, std::string path, std::unique_ptr<WritableFile> base)
      : env_(env), path_(std::move(path)), base_(std::move(base)) {}
  absl::Status Append(std::string_view data) override {
    absl::Status s = env_.Operation(absl::StrFormat("append %d bytes to %s", data.size(), path_));
    if (!s.ok()) return s;
    s = base_->Append(data);
    if (s.ok()) size_ += data.size();
    return s;
  }
  absl::Status Sync() override {
    absl::Status s = env_.Operation("sync " + path_);
    if (!s.ok()) return s;
    s = base_->Sync();
    if (s.ok()) env_.SyncedFile(path_, size_);
    return s;
  }
  absl::Status Close() override {
    absl::Status s = env_.Operation("close " + path_);
    absl::Status c = base_->Close();  // the descriptor goes either way
    return s.ok() ? c : s;
  }

 private:
  FaultInjectionEnv& env_;
  std::string path_;
  std::unique_ptr<WritableFile> base_;
  uint64_t size_ = 0;
};

void FaultInjectionEnv::FailAt(int64_t n, absl::Status error) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_at_ = n;
  fail_error_ = std::move(error);
}

void FaultInjectionEnv::CrashAt(int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  crash_at_ = n;
}

void FaultInjectionEnv::SetFreeBytes(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  free_bytes_ = bytes;
}

void FaultInjectionEnv::ClearFaults() {
  std::lock_guard<std::mutex> lock(mu_);
  fail_at_ = crash_at_ = 0;
}

int64_t FaultInjectionEnv::operations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return count_;
}

std::vector<std::string> FaultInjectionEnv::log() const {
  std::lock_guard<std::mutex> lock(mu_);
  return log_;
}

absl::Status FaultInjectionEnv::Operation(const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t n = ++count_;
  log_.push_back(absl::StrFormat("%d: %s", n, what));
  if (crash_at_ > 0 && n >= crash_at_) {
    return absl::UnavailableError(
        absl::StrFormat("injected crash at operation %d (%s)", crash_at_, what));
  }
  if (n == fail_at_) {
    return absl::Status(fail_error_.code(), absl::StrFormat("%s (injected at operation %d: %s)",
                                                            fail_error_.message(), n, what));
  }
  return absl::OkStatus();
}

void FaultInjectionEnv::SyncedFile(const std::string& path, uint64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  synced_size_[path] = size;
}

absl::Status FaultInjectionEnv::CreateDirs(const std::string& path) {
  absl::Status s = Operation("mkdir " + path);
  if (!s.ok()) return s;
  // The directories this call creates, outermost first: each is durable once its parent syncs.
  std::vector<std::string> created;
  for (std::string p = path; !p.empty() && p != "." && p != "/" && !base_.Exists(p);
       p = Parent(p)) {
    created.insert(created.begin(), p);
  }
  s = base_.CreateDirs(path);
  if (!s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& p : created) {
    pending_.push_back(Pending{.kind = Pending::kCreated,
                               .dir = Parent(p),
                               .path = p,
                               .from = {},
                               .replaced = false,
                               .old_contents = {}});
  }
  return s;
}

absl::StatusOr<std::unique_ptr<WritableFile>> FaultInjectionEnv::NewWritableFile(
    const std::string& path) {
  absl::Status s = Operation("create " + path);
  if (!s.ok()) return s;
  const bool existed = base_.Exists(path);
  auto file = base_.NewWritableFile(path);
  if (!file.ok()) return file.status();
  std::lock_guard<std::mutex> lock(mu_);
  synced_size_[path] = 0;
  if (!existed) {
    pending_.push_back(Pending{.kind = Pending::kCreated,
                               .dir = Parent(path),
                               .path = path,
                               .from = {},
                               .replaced = false,
                               .old_contents = {}});
  }
  return std::unique_ptr<WritableFile>(new File(*this, path, *std::move(file)));
}

absl::StatusOr<std::unique_ptr<RandomAccessFile>> FaultInjectionEnv::NewRandomAccessFile(
    const std::string& path) {
  return base_.NewRandomAccessFile(path);
}

absl::Status FaultInjectionEnv::Rename(const std::string& from, const std::string& to) {
  absl::Status s = Operation("rename " + from + " -> " + to);
  if (!s.ok()) return s;
  Pending p{.kind = Pending::kRenamed,
            .dir = Parent(to),
            .path = to,
            .from = from,
            .replaced = false,
            .old_contents = {}};
  if (auto info = base_.Stat(to); info.ok() && !info->is_dir) {
    auto old = base_.ReadFile(to);
    if (old.ok()) {
      p.replaced = true;
      p.old_contents = *std::move(old);
    }
  }
  s = base_.Rename(from, to);
  if (!s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  // What was learnt about the files under `from` now holds under `to`.
  std::map<std::string, uint64_t> moved;
  for (auto it = synced_size_.begin(); it != synced_size_.end();) {
    if (Under(it->first, from)) {
      moved[to + it->first.substr(from.size())] = it->second;
      it = synced_size_.erase(it);
    } else {
      ++it;
    }
  }
  synced_size_.merge(moved);
  // A directory renamed is synced under its new name; what a cut undoes is undone newest
  // first, so the names to undo stay the old ones.
  for (Pending& q : pending_) {
    if (Under(q.dir, from)) q.dir = to + q.dir.substr(from.size());
  }
  pending_.push_back(std::move(p));
  return s;
}

absl::StatusOr<std::vector<std::string>> FaultInjectionEnv::ListDir(const std::string& path) {
  return base_.ListDir(path);
}

absl::Status FaultInjectionEnv::RemoveAll(const std::string& path) {
  absl::Status s = Operation("remove " + path);
  if (!s.ok()) return s;
  s = base_.RemoveAll(path);
  if (!s.ok()) return s;
  // A removal is not undone by a power cut here (the model is of what a cut loses, and the
  // library never relies on a removal being durable).
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(synced_size_, [&](const auto& kv) { return Under(kv.first, path); });
  std::erase_if(pending_, [&](const Pending& q) { return Under(q.path, path); });
  return s;
}

absl::Status FaultInjectionEnv::SyncDir(const std::string& path) {
  absl::Status s = Operation("syncdir " + path);
  if (!s.ok()) return s;
  s = base_.SyncDir(path);
  if (!s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(pending_, [&](const Pending& q) { return q.dir == path; });
  return s;
}

absl::StatusOr<FileInfo> FaultInjectionEnv::Stat(const std::string& path) {
  return base_.Stat(path);
}

absl::StatusOr<uint64_t> FaultInjectionEnv::FreeBytes(const std::string& path) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_bytes_.has_value()) return *free_bytes_;
  }
  return base_.FreeBytes(path);
}

void FaultInjectionEnv::DropUnsyncedData() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [path, size] : synced_size_) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) std::filesystem::resize_file(path, size, ec);
  }
  for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) {
    if (it->kind == Pending::kCreated) {
      (void)base_.RemoveAll(it->path);
      continue;
    }
    if (base_.Rename(it->path, it->from).ok() && it->replaced) {
      (void)base_.WriteFile(it->path, it->old_contents);
    }
  }
  pending_.clear();
}

}  // namespace herd::checkpoint
