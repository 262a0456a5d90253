// The scheduler's state sequence and its witnesses (scheduler/state_sequence.h, witness.cc): a
// state that restarts older than what the scheduler acknowledged (here: the directory swapped
// for a copy taken earlier, which is what a log cut at a record boundary leaves) is refused
// with DATA_LOSS as soon as a process that heard a lost number calls, every call from then on
// answers it and nothing changes, a restart refuses too, and --accept-data-loss serves the
// recovered state instead.

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>
#include <vector>

#include "scheduler/scheduler_core.h"
#include "scheduler/state_sequence.h"
#include "tests/unit/scheduler/test_jobs.h"

namespace herd::scheduler {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::ExampleSpec;
using testing::TempDir;

absl::StatusOr<std::unique_ptr<SchedulerCore>> TryOpen(const std::string& dir,
                                                       bool accept_data_loss = false) {
  SchedulerOptions o;
  o.state_dir = dir;
  o.accept_data_loss = accept_data_loss;
  return SchedulerCore::Open(std::move(o));
}

std::unique_ptr<SchedulerCore> Open(const std::string& dir, bool accept_data_loss = false) {
  auto core = TryOpen(dir, accept_data_loss);
  EXPECT_TRUE(core.ok()) << core.status();
  return core.ok() ? *std::move(core) : nullptr;
}

herd::v1::RegisterNodeRequest Reg(const std::string& name, uint64_t seen = 0) {
  herd::v1::RegisterNodeRequest r;
  r.set_job("j1");
  r.set_role(herd::v1::ROLE_WORKER);
  r.set_name(name);
  r.set_seen_state_seq(seen);
  return r;
}

herd::v1::HeartbeatRequest Beat(uint64_t node, uint64_t seen) {
  herd::v1::HeartbeatRequest h;
  h.set_job("j1");
  h.set_node_id(node);
  h.set_seen_state_seq(seen);
  return h;
}

// Replaces the (closed) state in `dir` with the copy in `older`.
void Restore(const std::string& older, const std::string& dir) {
  fs::remove_all(dir);
  fs::copy(older, dir, fs::copy_options::recursive);
}

TEST(StateSequence, EachStartNumbersFromItsOwnBase) {
  StateSequence first(/*recovered=*/10, /*now_us=*/1000);
  EXPECT_TRUE(first.Holds(0));  // a process that heard nothing
  EXPECT_TRUE(first.Holds(10));
  EXPECT_FALSE(first.Holds(11)) << "a write of an earlier start the open did not recover";
  EXPECT_EQ(first.next(), 1000u);
  for (int i = 0; i < 5; ++i) first.Advance();
  EXPECT_EQ(first.current(), 1004u);
  EXPECT_TRUE(first.Holds(1004));
  EXPECT_FALSE(first.Holds(1005)) << "a number this start never wrote";
  EXPECT_FALSE(first.Holds(500));

  // Every write of that start lost: the next start recovers 10 again, but its numbers start
  // later, so the lost 1004 is never mistaken for one of its own, however many it writes.
  StateSequence second(10, 2000);
  for (int i = 0; i < 10; ++i) second.Advance();
  EXPECT_FALSE(second.Holds(1004));
  EXPECT_TRUE(second.Holds(2009));

  // A clock behind the recovered number: numbering goes on after it.
  StateSequence behind(5000, 10);
  EXPECT_EQ(behind.next(), 5001u);
}

TEST(Witness, AnswersCarryTheSequenceAndARestartThatLostNothingServesEveryWitness) {
  TempDir dir;
  uint64_t node = 0, heard = 0;
  {
    auto core = Open(dir.path());
    ASSERT_TRUE(core->SubmitJob(ExampleSpec("j1", 2, 0)).ok());
    auto reg = core->RegisterNode(Reg("w0"));
    ASSERT_TRUE(reg.ok()) << reg.status();
    EXPECT_GT(reg->state_seq(), 0u);
    EXPECT_EQ(reg->state_seq(), core->StateSeq());
    node = reg->node_id();
    auto hb = core->Heartbeat(Beat(node, reg->state_seq()));
    ASSERT_TRUE(hb.ok()) << hb.status();
    EXPECT_EQ(hb->state_seq(), reg->state_seq()) << "a worker's heartbeat writes nothing";
    auto again = core->RegisterNode(Reg("w1", hb->state_seq()));
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_GT(again->state_seq(), reg->state_seq());
    heard = again->state_seq();
  }
  auto core = Open(dir.path());
  EXPECT_EQ(core->StateSeq(), heard);
  ASSERT_TRUE(core->SubmitJob(ExampleSpec("j2", 1, 0)).ok());
  EXPECT_GT(core->StateSeq(), heard);
  auto hb = core->Heartbeat(Beat(node, heard));
  ASSERT_TRUE(hb.ok()) << hb.status();
  EXPECT_EQ(hb->state_seq(), core->StateSeq());
  EXPECT_TRUE(core->Refusal().ok());
}

TEST(Witness, AStateThatWentBackInTimeIsRefusedByEveryCallAndLeftUnchanged) {
  TempDir dir, older;
  uint64_t w0 = 0, w1 = 0, lost = 0;
  {
    auto core = Open(dir.path());
    ASSERT_TRUE(core->SubmitJob(ExampleSpec("j1", 2, 0)).ok());
    w0 = core->RegisterNode(Reg("w0"))->node_id();
  }
  Restore(dir.path(), older.path());  // the copy the state will go back to
  {
    auto core = Open(dir.path());
    auto reg = core->RegisterNode(Reg("w1"));
    ASSERT_TRUE(reg.ok()) << reg.status();
    w1 = reg->node_id();
    lost = reg->state_seq();  // w1 heard it; the restored state lacks it
  }
  Restore(older.path(), dir.path());

  auto core = Open(dir.path());
  const uint64_t recovered = core->StateSeq();
  ASSERT_LT(recovered, lost);
  // Before a witness calls, the scheduler cannot know: it serves (and writes) as usual.
  ASSERT_TRUE(core->Heartbeat(Beat(w0, 0)).ok());
  ASSERT_TRUE(core->SubmitJob(ExampleSpec("j2", 1, 0)).ok());
  ASSERT_GT(core->StateSeq(), lost) << "this start's numbers are past the lost one";
  const std::string j1 = core->GetJob("j1")->SerializeAsString();
  // A store read that blocks now is woken by the refusal.
  absl::Status blocked;
  std::thread reader(
      [&] { blocked = core->StoreGet("j1", "never", Deadline::After(20s)).status(); });

  auto refused = core->Heartbeat(Beat(w1, lost));
  ASSERT_TRUE(absl::IsDataLoss(refused.status())) << refused.status();
  const std::string said(refused.status().message());
  for (const std::string& part : std::vector<std::string>{
           dir.path(), "went back in time", "recovered state sequence " + std::to_string(recovered),
           "had heard " + std::to_string(lost), "node id " + std::to_string(w1) + " of job 'j1'",
           "--accept-data-loss"}) {
    EXPECT_NE(said.find(part), std::string::npos) << part << " in: " << said;
  }
  reader.join();
  EXPECT_TRUE(absl::IsDataLoss(blocked)) << blocked;
  // Every call, of every job, whoever asks, answers the same; nothing changes.
  EXPECT_TRUE(absl::IsDataLoss(core->Refusal()));
  EXPECT_TRUE(absl::IsDataLoss(core->GetJob("j1").status()));
  EXPECT_TRUE(absl::IsDataLoss(core->GetJob("j2").status()));
  EXPECT_TRUE(absl::IsDataLoss(core->Heartbeat(Beat(w0, 0)).status()));
  EXPECT_TRUE(absl::IsDataLoss(core->RegisterNode(Reg("w1")).status()));
  EXPECT_TRUE(absl::IsDataLoss(core->SubmitJob(ExampleSpec("j3", 1, 0)).status()));
  EXPECT_TRUE(absl::IsDataLoss(core->CancelJob("j1", "").status()));
  EXPECT_TRUE(absl::IsDataLoss(core->StoreSet("j1", "k", "v")));
  herd::v1::GetPlanRequest plan;
  plan.set_job("j1");
  EXPECT_TRUE(absl::IsDataLoss(core->GetPlan(plan).status()));
  core.reset();

  // A restart refuses at once, although no witness is left to tell it.
  auto again = TryOpen(dir.path());
  ASSERT_TRUE(absl::IsDataLoss(again.status())) << again.status();
  EXPECT_NE(again.status().message().find("went back in time"), std::string::npos);
  EXPECT_NE(again.status().message().find("earlier start"), std::string::npos);

  // The operator accepts the loss: the job is exactly as recovered (the refusal changed
  // nothing), the witness is logged, and node ids are not handed out twice.
  core = Open(dir.path(), /*accept_data_loss=*/true);
  ASSERT_NE(core, nullptr);
  EXPECT_EQ(core->GetJob("j1")->SerializeAsString(), j1);
  auto unknown = core->Heartbeat(Beat(w1, lost));
  EXPECT_TRUE(absl::IsNotFound(unknown.status()))
      << "its registration was lost: " << unknown.status();
  auto back = core->RegisterNode(Reg("w1", lost));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_GT(back->node_id(), w1);
  EXPECT_GT(back->state_seq(), lost);
  core.reset();
  EXPECT_TRUE(TryOpen(dir.path()).ok()) << "accepted once, the state is served again";
}

TEST(Witness, AStateDirectoryReplacedByAnEmptyOneIsRefusedWhenAProcessComesBack) {
  TempDir first, empty;
  uint64_t heard = 0;
  {
    auto core = Open(first.path());
    ASSERT_TRUE(core->SubmitJob(ExampleSpec("j1", 2, 0)).ok());
    heard = core->RegisterNode(Reg("w0"))->state_seq();
  }
  auto core = Open(empty.path());
  auto refused = core->RegisterNode(Reg("w0", heard));
  ASSERT_TRUE(absl::IsDataLoss(refused.status())) << refused.status();
  EXPECT_NE(refused.status().message().find("recovered state sequence 0"), std::string::npos)
      << refused.status();
  EXPECT_NE(refused.status().message().find("worker 'w0' registering in job 'j1'"),
            std::string::npos)
      << refused.status();
}

TEST(Witness, AcceptingTheLossAtStartServesEveryWitness) {
  TempDir dir, older;
  {
    auto core = Open(dir.path());
    ASSERT_TRUE(core->SubmitJob(ExampleSpec("j1", 2, 0)).ok());
  }
  Restore(dir.path(), older.path());
  uint64_t lost = 0, w0 = 0;
  {
    auto core = Open(dir.path());
    auto reg = core->RegisterNode(Reg("w0"));
    w0 = reg->node_id();
    lost = reg->state_seq();
  }
  Restore(older.path(), dir.path());
  auto core = Open(dir.path(), /*accept_data_loss=*/true);
  EXPECT_TRUE(absl::IsNotFound(core->Heartbeat(Beat(w0, lost)).status()));
  EXPECT_TRUE(core->Refusal().ok());
  auto reg = core->RegisterNode(Reg("w0", lost));
  ASSERT_TRUE(reg.ok()) << reg.status();
  EXPECT_GT(reg->state_seq(), lost);
}

}  // namespace
}  // namespace herd::scheduler
