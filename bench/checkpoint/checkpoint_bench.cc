#include "bench/checkpoint/checkpoint_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <optional>

#include "absl/strings/str_format.h"
#include "checkpoint/catalog.h"
#include "checkpoint/checkpoint_id.h"
#include "checkpoint/commit.h"
#include "checkpoint/describe.h"
#include "checkpoint/env.h"
#include "checkpoint/state_source.h"
#include "checkpoint/writer.h"
#include "common/json.h"
#include "common/temp_dir.h"

namespace herd::bench {
namespace {

using Clock = std::chrono::steady_clock;
namespace ckpt = checkpoint;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

constexpr int64_t kTensorBytes = int64_t{16} << 20;  // the model's tensors, for the staging copy
constexpr int64_t kAppendBytes = int64_t{8} << 20;

struct Row {
  int64_t bytes = 0;
  double memcpy_gbs = 0, disk_gbs = 0;
  double stall_s = 0, copy_s = 0, write_s = 0, commit_s = 0, durable_s = 0, target_s = 0;
  double verify_s = 0;
  int64_t staged_bytes = 0;
};

// One copy of `src` into `dst`, timed.
double TimeMemcpy(const std::vector<char>& src, std::vector<char>& dst) {
  const auto t0 = Clock::now();
  std::memcpy(dst.data(), src.data(), src.size());
  return Seconds(t0, Clock::now());
}

// One file of `bytes` written in 8 MiB appends and fsynced in `dir`, timed; removed after.
absl::StatusOr<double> TimeWriteFsync(const std::string& dir, const std::vector<char>& data) {
  const std::string path = dir + "/bench-write.tmp";
  const auto t0 = Clock::now();
  auto file = ckpt::PosixEnv().NewWritableFile(path);
  if (!file.ok()) return file.status();
  absl::Status s;
  for (size_t at = 0; at < data.size() && s.ok(); at += kAppendBytes) {
    const size_t n = std::min<size_t>(kAppendBytes, data.size() - at);
    s = (*file)->Append(std::string_view(data.data() + at, n));
  }
  if (s.ok()) s = (*file)->Sync();
  if (s.ok()) s = (*file)->Close();
  const double t = Seconds(t0, Clock::now());
  (void)ckpt::PosixEnv().RemoveAll(path);
  if (!s.ok()) return s;
  return t;
}

// One checkpoint of a model of `model.size()` bytes: staging copy + Stage (the stall), the
// background write, the commit, then a verify.
absl::StatusOr<Row> TimeCheckpoint(const std::string& dir, int64_t iteration,
                                   const std::vector<char>& model, ckpt::CheckpointWriter& writer) {
  Row row;
  const std::string id = ckpt::CheckpointId(iteration);
  std::promise<absl::StatusOr<herd::v1::CheckpointFile>> written;
  auto written_future = written.get_future();
  Clock::time_point write_done;

  const auto cut = Clock::now();
  ckpt::ProcessState state;
  state.process = ckpt::WorkerProcess(0);
  const int64_t total = static_cast<int64_t>(model.size());
  for (int64_t at = 0, t = 0; at < total; at += kTensorBytes, ++t) {
    const int64_t n = std::min(kTensorBytes, total - at);
    ckpt::Extent e;
    e.name = absl::StrFormat("param/t%d", t);
    e.dtype = DType::kFloat32;
    e.total = n / 4;
    e.bytes.assign(model.data() + at, static_cast<size_t>(n));
    state.extents.push_back(std::move(e));
  }
  state.values["iteration"] = std::to_string(iteration);
  const auto copied = Clock::now();
  writer.Stage(dir, id, std::move(state), [&](absl::StatusOr<herd::v1::CheckpointFile> f) {
    write_done = Clock::now();
    written.set_value(std::move(f));
  });
  const auto staged = Clock::now();
  row.staged_bytes = writer.pending_bytes();

  auto file = written_future.get();
  if (!file.ok()) return file.status();
  herd::v1::CheckpointManifest manifest;
  manifest.set_job("bench");
  manifest.set_id(id);
  manifest.set_workers(1);
  *manifest.add_files() = *file;
  const auto commit_start = Clock::now();
  absl::Status s = ckpt::Commit(ckpt::PosixEnv(), dir, manifest);
  const auto committed = Clock::now();
  if (!s.ok()) return s;
  s = ckpt::VerifyCheckpoint(ckpt::PosixEnv(), ckpt::CheckpointDirOf(dir, id));
  const auto verified = Clock::now();
  if (!s.ok()) return s;

  row.bytes = total;
  row.copy_s = Seconds(cut, copied);
  row.stall_s = Seconds(cut, staged);
  row.write_s = Seconds(staged, write_done);
  row.commit_s = Seconds(commit_start, committed);
  row.durable_s = Seconds(cut, committed);
  row.verify_s = Seconds(committed, verified);
  return row;
}

}  // namespace

absl::Status RunCheckpointBench(const CheckpointBenchOptions& options) {
  std::optional<TempDir> temp;
  std::string dir = options.dir;
  if (dir.empty()) {
    auto t = TempDir::Create("herd-bench-checkpoint");
    if (!t.ok()) return t.status();
    temp.emplace(*std::move(t));
    dir = temp->path();
  } else {
    absl::Status s = ckpt::PosixEnv().CreateDirs(dir);
    if (!s.ok()) return s;
  }
  if (!options.json) {
    std::printf("herd bench checkpoint: %s, median of %d rounds; stall = staging copy + Stage\n",
                dir.c_str(), options.rounds);
    std::printf("%10s %10s %12s %10s %10s %10s %10s %10s %10s %10s %12s\n", "state", "memcpy",
                "write+fsync", "stall", "copy", "write", "commit", "durable", "target", "verify",
                "staged");
    std::printf("%10s %10s %12s %10s %10s %10s %10s %10s %10s %10s %12s\n", "", "GB/s", "GB/s",
                "ms", "ms", "ms", "ms", "ms", "ms", "ms", "bytes");
  }
  ckpt::CheckpointWriter writer;
  int64_t iteration = 0;
  for (int64_t size : options.sizes) {
    size = size / 4 * 4;
    std::vector<char> model(static_cast<size_t>(size));
    for (size_t i = 0; i < model.size(); i += 4096) model[i] = static_cast<char>(i * 31);
    std::vector<char> copy(model.size(), 1);
    std::vector<Row> rows;
    for (int round = 0; round < options.rounds; ++round) {
      Row row;
      row.memcpy_gbs = static_cast<double>(size) / TimeMemcpy(model, copy) / 1e9;
      auto disk = TimeWriteFsync(dir, model);
      if (!disk.ok()) return disk.status();
      row.disk_gbs = static_cast<double>(size) / *disk / 1e9;
      auto timed = TimeCheckpoint(dir, ++iteration, model, writer);
      if (!timed.ok()) return timed.status();
      timed->memcpy_gbs = row.memcpy_gbs;
      timed->disk_gbs = row.disk_gbs;
      timed->target_s = 1.25 * static_cast<double>(size) / (row.disk_gbs * 1e9) + 0.5;
      rows.push_back(*timed);
      // Keep only the newest checkpoint, as a job with keep_last = 1 would.
      absl::Status s = ckpt::ApplyRetention(ckpt::PosixEnv(), dir, 1, 0);
      if (!s.ok()) return s;
    }
    std::sort(rows.begin(), rows.end(),
              [](const Row& a, const Row& b) { return a.durable_s < b.durable_s; });
    const Row& r = rows[rows.size() / 2];
    if (options.json) {
      json::Object o;
      o.Add("bytes", r.bytes)
          .Add("memcpy_gbs", r.memcpy_gbs)
          .Add("write_fsync_gbs", r.disk_gbs)
          .Add("stall_ms", r.stall_s * 1e3)
          .Add("copy_ms", r.copy_s * 1e3)
          .Add("write_ms", r.write_s * 1e3)
          .Add("commit_ms", r.commit_s * 1e3)
          .Add("durable_ms", r.durable_s * 1e3)
          .Add("target_ms", r.target_s * 1e3)
          .Add("verify_ms", r.verify_s * 1e3)
          .Add("staged_bytes", r.staged_bytes);
      std::printf("%s\n", o.Write().c_str());
    } else {
      std::printf("%10s %10.2f %12.2f %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f %12lld\n",
                  ckpt::HumanBytes(r.bytes).c_str(), r.memcpy_gbs, r.disk_gbs, r.stall_s * 1e3,
                  r.copy_s * 1e3, r.write_s * 1e3, r.commit_s * 1e3, r.durable_s * 1e3,
                  r.target_s * 1e3, r.verify_s * 1e3, static_cast<long long>(r.staged_bytes));
    }
    std::fflush(stdout);
  }
  // Leave no checkpoint behind in a directory the user named.
  if (!options.dir.empty()) {
    auto list = ckpt::ListCheckpoints(ckpt::PosixEnv(), dir);
    if (list.ok()) {
      for (const auto& c : *list) {
        if (c.manifest.job() == "bench") (void)ckpt::PosixEnv().RemoveAll(c.path);
      }
    }
    (void)ckpt::PosixEnv().RemoveAll(dir + "/" + std::string(ckpt::kLatestFile));
  }
  return absl::OkStatus();
}

}  // namespace herd::bench
