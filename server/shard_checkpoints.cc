#include "server/shard_checkpoints.h"

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "plan/modes.h"
#include "scheduler/client/checkpoint_report.h"

namespace herd::server {
namespace {

constexpr auto kPoll = std::chrono::seconds(1);
constexpr auto kCutWait = std::chrono::minutes(10);  // the scheduler aborts long before

}  // namespace

ShardCheckpoints::ShardCheckpoints(scheduler::SchedulerClient& sched, std::string job,
                                   uint64_t node_id, int shard, std::function<Engine*()> engine,
                                   int64_t first)
    : sched_(sched),
      job_(std::move(job)),
      node_id_(node_id),
      shard_(shard),
      engine_(std::move(engine)),
      next_(first) {
  thread_ = std::thread([this] { Loop(); });
}

ShardCheckpoints::~ShardCheckpoints() {
  stopping_.store(true);
  if (thread_.joinable()) thread_.join();
  if (auto st = writer_.Drain(Deadline::After(std::chrono::seconds(30))); !st.ok()) {
    Log().warn("server: shard {}: checkpoint files not written: {}", shard_, st.ToString());
  }
}

void ShardCheckpoints::Loop() {
  while (!stopping_.load()) {
    const std::string key = absl::StrFormat("checkpoint/%d", next_);
    auto value = sched_.StoreGet(job_, key, Deadline::After(kPoll));
    if (!value.ok()) {
      // DEADLINE_EXCEEDED: none yet; FAILED_PRECONDITION: the job ended; UNAVAILABLE: the
      // scheduler restarts. Each is asked again (until the shard stops).
      if (!absl::IsDeadlineExceeded(value.status())) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
      continue;
    }
    ++next_;
    herd::v1::CheckpointRecord c;
    if (!c.ParseFromString(*value)) {
      Log().error("server: shard {}: announcement {} does not parse", shard_, key);
      continue;
    }
    Take(c);
  }
}

void ShardCheckpoints::Take(const herd::v1::CheckpointRecord& c) {
  const Deadline deadline = Deadline::After(kCutWait);
  // Every worker at the cut: every push before it has been answered, none after it sent.
  for (const auto& p : c.expected()) {
    if (!absl::StartsWith(p, "worker-")) continue;
    const std::string key = checkpoint::CutKey(c.id(), p);
    for (;;) {
      auto at = sched_.StoreGet(job_, key, Deadline::After(kPoll));
      if (at.ok()) break;
      if (stopping_.load() || deadline.expired() || absl::IsFailedPrecondition(at.status()) ||
          absl::IsNotFound(at.status())) {
        Log().warn("server: shard {}: checkpoint {}: {} never reached the cut: {}", shard_, c.id(),
                   p, at.status().ToString());
        return;  // the scheduler aborts the checkpoint (timeout, death, or the job's end)
      }
    }
  }
  checkpoint::ProcessState state;
  state.process = ShardProcess(shard_);
  absl::Status exported = absl::OkStatus();
  // An engine whose keys no worker has offered yet (a ps_* mode scheduled later) holds nothing.
  if (Engine* engine = engine_(); engine != nullptr && engine->Stats().keys_initialized > 0) {
    // Every key is at the round the workers completed last (none pushes until this returns).
    auto got = engine->ExportState(engine->Stats().max_version, deadline);
    if (got.ok()) {
      state = std::move(*got);
    } else {
      exported = got.status();
    }
  }
  // The workers go on now: their next push may change the engine, its copy is taken.
  if (auto st = sched_.StoreSet(job_, checkpoint::CutKey(c.id(), ShardProcess(shard_)), "");
      !st.ok()) {
    Log().warn("server: shard {}: checkpoint {}: {}", shard_, c.id(), st.ToString());
  }
  if (!exported.ok()) {
    Report(c.id(), exported);
    return;
  }
  const std::string id = c.id();
  writer_.Stage(
      c.dir(), id, std::move(state),
      [this, id](absl::StatusOr<herd::v1::CheckpointFile> file) { Report(id, std::move(file)); });
}

void ShardCheckpoints::Report(const std::string& id,
                              absl::StatusOr<herd::v1::CheckpointFile> file) {
  if (!file.ok()) {
    Log().warn("server: shard {}: checkpoint {}: {}", shard_, id, file.status().ToString());
  }
  const absl::Status answer = scheduler::ReportCheckpointFile(
      sched_, job_, node_id_, id, std::move(file), Deadline::After(std::chrono::seconds(30)));
  if (!answer.ok()) {
    Log().warn("server: shard {}: report of checkpoint {}: {}", shard_, id, answer.ToString());
  }
}

}  // namespace herd::server
