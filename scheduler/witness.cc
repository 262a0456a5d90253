// SchedulerCore: the witnesses of the scheduler's own state. A write-ahead log cut at a record
// boundary (or the unsynced tail a power cut takes, or a state directory swapped for an older
// copy or an empty one) opens "cleanly" without its last writes: registrations, epochs, mode
// switches, iteration reports, checkpoint records, store keys, jobs submitted or ended, the
// node-id counter. The database cannot tell; the job's processes can, because every answer
// they got carried the state sequence (scheduler/state_sequence.h) and they send back the
// highest they heard.
//
// What a refusal does: going on would hand out plans, epochs and node ids from an older state
// to processes that already acted on newer ones (node ids given twice, a mode switch undone,
// a finished job running again, a checkpoint's record gone while its files stand). So the
// scheduler stops changing anything and tells everyone: every call, of every job, answers the
// same DATA_LOSS naming the state directory and the two numbers; the failure detector declares
// no death; the job records stay exactly as recovered, so restoring the directory or accepting
// the loss starts from them. The refusal is recorded in the state (meta/lost), so a restart
// refuses at once even when no witness is left to tell. The processes end with the error
// (`herd worker` and `herd server` exit 1). `--accept-data-loss` serves the recovered state
// instead (the witness is logged), and checkpoints on disk stay readable either way
// (`herd job submit --resume DIR`).

#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "scheduler/bounds.h"
#include "scheduler/scheduler_core.h"

namespace herd::scheduler {

absl::Status SchedulerCore::Refusal() {
  std::lock_guard<std::mutex> lock(mu_);
  return refusal_;
}

void SchedulerCore::OnRefusal(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  on_refusal_ = std::move(fn);
  if (!refusal_.ok() && on_refusal_) on_refusal_();
}

uint64_t SchedulerCore::StateSeq() {
  std::lock_guard<std::mutex> lock(mu_);
  return db_->sequence().current();
}

absl::Status SchedulerCore::HearWitness(uint64_t seen, std::string_view job, uint64_t node_id,
                                        std::string who) {
  if (!refusal_.ok()) return refusal_;
  const StateSequence& seq = db_->sequence();
  if (seq.Holds(seen) || seen <= accepted_seq_) return absl::OkStatus();
  if (who.empty()) {
    who = absl::StrFormat("node id %d of job '%s'", node_id, Echo(job));
    auto it = nodes_.find(node_id);
    auto j = jobs_.find(job);
    if (it != nodes_.end() && it->second.job == job && j != jobs_.end()) {
      const NodeRef& ref = it->second;
      const auto& slots = ref.role == herd::v1::ROLE_WORKER ? j->second.status.workers()
                                                            : j->second.status.servers();
      if (ref.slot < slots.size() && slots[ref.slot].node_id() == node_id) {
        who = absl::StrFormat("%s of job '%s'", DescribeMember(ref.role, slots[ref.slot]), job);
      }
    }
  }
  const std::string what = absl::StrFormat(
      "the scheduler state in %s went back in time: it recovered state sequence %d, but %s had "
      "heard %d from this scheduler, so changes it acknowledged are missing (registrations, "
      "epochs, iteration reports, checkpoint records, store keys, jobs: whatever the lost writes "
      "held). A write-ahead log lost its last records, or the directory was replaced by an older "
      "copy (write-ahead logs replayed: %s)",
      db_->dir(), seq.recovered(), who, seen, db_->replayed_logs());
  if (options_.accept_data_loss) {
    accepted_seq_ = seen;
    Log().warn("scheduler: {}; serving what was recovered, as --accept-data-loss asks", what);
    return absl::OkStatus();
  }
  refusal_ = absl::DataLossError(absl::StrFormat(
      "%s. The scheduler answers every call with this error and changes nothing; the jobs' "
      "processes stop. Restore the directory from a copy and restart, or restart with "
      "--accept-data-loss to serve what was recovered",
      what));
  Log().error("scheduler: {}", std::string(refusal_.message()));
  // Recorded so that a restart refuses too, although the processes that knew may be gone.
  if (auto st = db_->MarkLost(std::string(refusal_.message())); !st.ok()) {
    Log().error("scheduler: cannot record the refusal in the state: {}", std::string(st.message()));
  }
  db_->Fence(refusal_);
  changed_.notify_all();  // blocked calls answer the refusal
  if (on_refusal_) on_refusal_();
  return refusal_;
}

absl::Status SchedulerCore::CheckRecordedLoss(const std::string& lost) {
  if (lost.empty()) return absl::OkStatus();
  if (!options_.accept_data_loss) {
    return absl::DataLossError(absl::StrFormat(
        "%s (found while an earlier start of the scheduler served; nothing has changed since)",
        CutMessage(lost)));
  }
  Log().warn(
      "scheduler: an earlier start refused this state: {}; serving it, as "
      "--accept-data-loss asks",
      CutMessage(lost));
  return db_->ClearLost();
}

}  // namespace herd::scheduler
