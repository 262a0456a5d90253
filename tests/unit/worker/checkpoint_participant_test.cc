// The program values a checkpoint participant keeps (worker/checkpointing/
// checkpoint_participant.h): bounded, a refusal changes nothing; a joiner adopts a live
// worker's values as its own and as the ones it resumed with.
#include "worker/checkpointing/checkpoint_participant.h"

#include <gtest/gtest.h>

namespace herd::worker {
namespace {

CheckpointParticipant Participant() {
  // No scheduler is called by what these tests do (only a staged file's report calls it).
  return CheckpointParticipant(nullptr, "job", std::chrono::seconds(1));
}

TEST(CheckpointParticipant, ProgramValuesAreBoundedAndARefusalChangesNothing) {
  CheckpointParticipant p = Participant();
  ASSERT_TRUE(p.SetProgramValue("epoch", "3").ok());
  EXPECT_EQ(p.SetProgramValue("", "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p.SetProgramValue(std::string(65, 'k'), "x").code(),
            absl::StatusCode::kInvalidArgument);
  const absl::Status big = p.SetProgramValue("epoch", std::string((64 << 10) + 1, 'v'));
  EXPECT_EQ(big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(big.message().find("'epoch'"), std::string::npos) << big;
  EXPECT_EQ(p.program_values().at("epoch"), "3");
  for (int i = 1; i < 64; ++i) ASSERT_TRUE(p.SetProgramValue("k" + std::to_string(i), "v").ok());
  const absl::Status more = p.SetProgramValue("one-more", "v");
  EXPECT_EQ(more.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(more.message().find("at most 64"), std::string::npos) << more;
  EXPECT_TRUE(p.SetProgramValue("epoch", "4").ok()) << "a key held already may change";
  EXPECT_EQ(p.program_values().size(), 64u);
  EXPECT_TRUE(p.resumed_program_values().empty());
}

TEST(CheckpointParticipant, AJoinerAdoptsTheLiveWorkersValues) {
  CheckpointParticipant p = Participant();
  ASSERT_TRUE(p.SetProgramValue("mine", "1").ok());
  p.AdoptProgramValues({{"step", "120"}});
  EXPECT_EQ(p.program_values(), (std::map<std::string, std::string>{{"step", "120"}}));
  EXPECT_EQ(p.resumed_program_values(), p.program_values());
  EXPECT_FALSE(p.resuming());
  EXPECT_TRUE(p.staged_id().empty());
  EXPECT_TRUE(p.Drain(Deadline::After(std::chrono::seconds(1))).ok()) << "nothing staged";
}

}  // namespace
}  // namespace herd::worker
