#include "worker/checkpointing/checkpoint_participant.h"

#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "checkpoint/env.h"
#include "checkpoint/state_source.h"
#include "common/logging.h"
#include "common/status.h"
#include "plan/modes.h"
#include "scheduler/client/checkpoint_report.h"

namespace herd::worker {
namespace {

constexpr char kProgramPrefix[] = "program/";
constexpr size_t kMaxProgramValues = 64;
constexpr size_t kMaxProgramKey = 64;
constexpr size_t kMaxProgramValueBytes = 64 << 10;

bool RunsOnServers(std::string_view mode) {
  const plan::ModeInfo* m = plan::FindMode(mode);
  return m != nullptr && m->needs_servers;
}

absl::StatusOr<int64_t> IntValue(const checkpoint::StateSource& from, const std::string& process,
                                 const std::string& key) {
  std::optional<std::string> text = from.Value(process, key);
  int64_t v = 0;
  if (!text.has_value() || !absl::SimpleAtoi(*text, &v)) {
    return absl::DataLossError(
        absl::StrFormat("the checkpoint's %s has no integer value '%s'", process, key));
  }
  return v;
}

}  // namespace

absl::Status CheckpointParticipant::SetProgramValue(const std::string& key, std::string value) {
  if (key.empty() || key.size() > kMaxProgramKey) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a checkpointed value's name has 1 to %d characters, got %d", kMaxProgramKey, key.size()));
  }
  if (value.size() > kMaxProgramValueBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("checkpointed value '%s' has %d bytes; at most %d", key, value.size(),
                        kMaxProgramValueBytes));
  }
  if (!program_values_.count(key) && program_values_.size() >= kMaxProgramValues) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "at most %d checkpointed values; '%s' would be one more", kMaxProgramValues, key));
  }
  program_values_[key] = std::move(value);
  return absl::OkStatus();
}

void CheckpointParticipant::AdoptProgramValues(std::map<std::string, std::string> values) {
  program_values_ = values;
  resumed_program_values_ = std::move(values);
}

void CheckpointParticipant::Stage(const std::string& dir, const std::string& id,
                                  checkpoint::ProcessState state) {
  for (const auto& [key, value] : program_values_) state.values[kProgramPrefix + key] = value;
  if (writer_ == nullptr) writer_ = std::make_unique<checkpoint::CheckpointWriter>();
  writer_->Stage(
      dir, id, std::move(state),
      [this, id](absl::StatusOr<herd::v1::CheckpointFile> file) { Report(id, std::move(file)); });
  staged_id_ = id;
}

absl::Status CheckpointParticipant::MeetShardsAtCut(transport::Store& store, const std::string& id,
                                                    std::string_view mode, int servers) {
  HERD_RETURN_IF_ERROR(
      store.Set(checkpoint::CutKey(id, checkpoint::WorkerProcess(rank_)), std::string(mode)));
  if (!RunsOnServers(mode)) return absl::OkStatus();
  const Deadline deadline = Deadline::After(timeout_);
  for (int s = 0; s < servers; ++s) {
    auto staged_shard = store.Get(checkpoint::CutKey(id, checkpoint::ShardProcess(s)), deadline);
    if (!staged_shard.ok()) {
      return absl::Status(staged_shard.status().code(),
                          absl::StrFormat("checkpoint %s: waiting for shard %d to stage: %s", id, s,
                                          staged_shard.status().message()));
    }
  }
  return absl::OkStatus();
}

void CheckpointParticipant::Report(const std::string& id,
                                   absl::StatusOr<herd::v1::CheckpointFile> file) {
  if (!file.ok()) Log().warn("worker {}: checkpoint {}: {}", rank_, id, file.status().ToString());
  // An aborted checkpoint stays aborted, and training goes on either way.
  const absl::Status answer = scheduler::ReportCheckpointFile(
      *client_, job_, node_id_, id, std::move(file), Deadline::After(timeout_));
  if (!answer.ok()) {
    Log().warn("worker {}: report of checkpoint {}: {}", rank_, id, answer.ToString());
  }
}

absl::Status CheckpointParticipant::Drain(Deadline deadline) {
  if (writer_ == nullptr) return absl::OkStatus();
  return writer_->Drain(deadline);
}

absl::StatusOr<std::optional<CheckpointParticipant::Start>> CheckpointParticipant::OpenResume(
    const herd::v1::JobStatus& job) {
  if (!job.has_resumed()) return std::nullopt;
  const auto& from = job.resumed();
  HERD_ASSIGN_OR_RETURN(resume_, checkpoint::OpenCheckpoint(checkpoint::PosixEnv(), from.path()));
  Start start;
  start.iteration = from.iteration();
  // The data position is global (the same on every worker of the run that saved it), read from
  // the lowest worker that saved a file: a checkpoint taken while an elastic job ran without a
  // worker has no file of that worker's slot, worker 0's included.
  std::optional<std::string> first;
  for (int r = 0; r < resume_->workers() && !first; ++r) {
    if (resume_->Value(checkpoint::WorkerProcess(r), "data/epoch").has_value()) {
      first = checkpoint::WorkerProcess(r);
    }
  }
  if (first) {
    HERD_ASSIGN_OR_RETURN(start.position.epoch, IntValue(*resume_, *first, "data/epoch"));
    HERD_ASSIGN_OR_RETURN(start.position.offset, IntValue(*resume_, *first, "data/offset"));
  }
  // Each worker's own program values (at another worker count, or where its slot saved no
  // file, those of the lowest worker that did).
  std::string mine = checkpoint::WorkerProcess(rank_ < resume_->workers() ? rank_ : 0);
  if (first && !resume_->Value(mine, "data/epoch").has_value()) mine = *first;
  for (const auto& file : resume_->manifest().files()) {
    if (file.process() != mine) continue;
    for (const auto& [key, value] : file.values()) {
      if (key.rfind(kProgramPrefix, 0) == 0) {
        resumed_program_values_[key.substr(sizeof(kProgramPrefix) - 1)] = value;
      }
    }
  }
  Log().info("worker {}: resuming from {} at iteration {} (data epoch {}, offset {})", rank_,
             from.path(), start.iteration, start.position.epoch, start.position.offset);
  return start;
}

absl::Status CheckpointParticipant::ImportParameters(
    const std::vector<herd::v1::TensorSpec>& layout, ImportWhere where,
    const std::vector<ModelTensor>& tensors) const {
  if (resume_ == nullptr) return absl::OkStatus();
  std::vector<herd::v1::TensorLayout> model;
  for (const auto& t : layout) {
    auto* l = &model.emplace_back();
    l->set_name(t.name());
    int64_t count = 1;
    for (int64_t d : t.shape()) count *= d;
    l->set_count(count);
    *l->mutable_shape() = t.shape();
    l->set_dtype(t.dtype());
  }
  HERD_RETURN_IF_ERROR(resume_->CheckLayout(model));
  // Decentralized models differ between workers: at the same worker count each takes its own,
  // at another the average. Every other mode's parameters are replicated: any copy, unchanged.
  // (executor_state.h has the rules.)
  if (auto st = ImportParams(*resume_, where, tensors, MissingParams::kRefuse); !st.ok()) {
    return absl::Status(st.code(),
                        absl::StrFormat("resuming from %s: %s", resume_->path(), st.message()));
  }
  return absl::OkStatus();
}

absl::Status CheckpointParticipant::ImportInto(Executor& executor) {
  if (resume_ == nullptr) return absl::OkStatus();
  HERD_RETURN_IF_ERROR(executor.ImportState(*resume_));
  resume_.reset();
  return absl::OkStatus();
}

}  // namespace herd::worker
