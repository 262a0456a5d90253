#include "checkpoint/writer.h"

#include <chrono>

#include "absl/strings/str_format.h"
#include "checkpoint/checkpoint_id.h"
#include "checkpoint/state_file.h"
#include "metrics/process_metrics.h"

namespace herd::checkpoint {

absl::StatusOr<herd::v1::CheckpointFile> WriteStateFile(Env& env, const std::string& dir,
                                                        const std::string& id,
                                                        const ProcessState& state) {
  if (!ParseCheckpointId(id).has_value()) {
    return absl::InvalidArgumentError(absl::StrFormat("'%s' is not a checkpoint id", id));
  }
  // Every process of the checkpoint creates the same directory; creating it is idempotent.
  const std::string tmp = TempDirOf(dir, id);
  absl::Status s = env.CreateDirs(tmp);
  if (!s.ok()) return s;
  const std::string name = StateFileName(state.process);
  return WriteStateFileAt(env, JoinPath(tmp, name), name, state);
}

CheckpointWriter::CheckpointWriter(Env& env) : env_(env), thread_([this] { Loop(); }) {}

CheckpointWriter::~CheckpointWriter() {
  std::deque<Job> cancelled;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    cancelled.swap(queue_);
    for (const Job& job : cancelled) pending_bytes_ -= job.bytes;
  }
  cv_.notify_all();
  thread_.join();
  for (Job& job : cancelled) {
    job.done(absl::CancelledError(absl::StrFormat(
        "checkpoint %s of %s: the writer stopped before writing it", job.id, job.state.process)));
  }
}

void CheckpointWriter::Stage(std::string dir, std::string id, ProcessState state, WriteDone done) {
  int64_t bytes = 0;
  for (const Extent& e : state.extents) bytes += static_cast<int64_t>(e.bytes.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_bytes_ += bytes;
    queue_.push_back(Job{std::move(dir), std::move(id), std::move(state), std::move(done), bytes});
  }
  cv_.notify_all();
}

absl::Status CheckpointWriter::Drain(Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  auto idle = [&] { return queue_.empty() && busy_ == 0; };
  if (deadline.infinite()) {
    cv_.wait(lock, idle);
  } else if (!cv_.wait_until(lock, deadline.at(), idle)) {
    return absl::DeadlineExceededError(
        absl::StrFormat("checkpoint writer: %d state file(s) still being written (%d bytes)",
                        queue_.size() + busy_, pending_bytes_));
  }
  return absl::OkStatus();
}

int64_t CheckpointWriter::pending_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_bytes_;
}

void CheckpointWriter::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left to write
    Job job = std::move(queue_.front());
    queue_.pop_front();
    ++busy_;
    lock.unlock();
    const auto begin = std::chrono::steady_clock::now();
    auto record = WriteStateFile(env_, job.dir, job.id, job.state);
    if (record.ok()) {
      metrics::ProcessMetrics::Get().RecordCheckpointWrite(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count(),
          static_cast<double>(record->bytes()));
    }
    job.state = ProcessState{};  // the staging copy is freed before `done` runs
    lock.lock();
    pending_bytes_ -= job.bytes;
    lock.unlock();
    job.done(std::move(record));
    lock.lock();
    --busy_;
    cv_.notify_all();
  }
}

}  // namespace herd::checkpoint
