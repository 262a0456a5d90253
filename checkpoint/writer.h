#pragma once
// Writes one process's part of a checkpoint in the background, so training stalls only for
// the caller's staging copy of its state (DESIGN.md, "Asynchronous").
//
// The caller copies its state at the cut into a ProcessState (the staging copy) and moves it
// into Stage(), which returns at once. The writer's thread writes
// DIR/.tmp-<id>/<process>.state (state_file.h has the format), computes the XXH3-64 checksum
// of every extent and of the whole file, fsyncs the file, frees the staging copy and calls
// `done` with the file's record (the CheckpointFile the process reports to whoever commits)
// or the error (a full or read-only disk, ...). The commit (commit.h) is someone else's step.
//
// Memory: each staged state is held until its file is written, so a process holds one copy of
// its state per checkpoint in flight (pending_bytes()). Stages are written in order, one at a
// time.
//
// Thread safety: Stage, Drain and pending_bytes may be called from any thread. `done` runs on
// the writer's thread and must not call Drain or destroy the writer.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/env.h"
#include "checkpoint/state.h"
#include "common/deadline.h"
#include "herd/v1/checkpoint.pb.h"

namespace herd::checkpoint {

using WriteDone = std::function<void(absl::StatusOr<herd::v1::CheckpointFile>)>;

class CheckpointWriter {
 public:
  // `env` outlives the writer.
  explicit CheckpointWriter(Env& env = PosixEnv());
  // Finishes the file being written, cancels the stages not started (their `done` gets
  // CANCELLED) and joins the thread.
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Queues `state` (moved in: the staging copy) to be written as DIR/.tmp-<id>/<process>.state.
  // Returns at once; `done` is called exactly once, on the writer's thread (or, for a stage
  // the destructor cancels, on the destroying thread).
  void Stage(std::string dir, std::string id, ProcessState state, WriteDone done);

  // Waits until every stage so far has been written and its `done` has returned.
  // DEADLINE_EXCEEDED (naming how many are left) when `deadline` passes first.
  absl::Status Drain(Deadline deadline);

  // Bytes of the staged states not yet written (what the staging copies hold now).
  int64_t pending_bytes() const;

 private:
  struct Job {
    std::string dir, id;
    ProcessState state;
    WriteDone done;
    int64_t bytes = 0;
  };
  void Loop();

  Env& env_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;      // guarded by mu_
  int busy_ = 0;               // guarded by mu_: jobs taken off the queue, not yet done
  int64_t pending_bytes_ = 0;  // guarded by mu_
  bool stopping_ = false;      // guarded by mu_
  std::thread thread_;
};

// The same write, synchronously, on the calling thread (what the writer's thread runs): the
// file DIR/.tmp-<id>/<process>.state and its record.
absl::StatusOr<herd::v1::CheckpointFile> WriteStateFile(Env& env, const std::string& dir,
                                                        const std::string& id,
                                                        const ProcessState& state);

}  // namespace herd::checkpoint
