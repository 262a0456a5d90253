// The handover of an elastic job's state to a worker that joins (worker/state_handover.h): the
// encoding round trip and its refusal of damaged bytes, who serves which joiner, the flags and
// the state over loopback communicators (threads as ranks), and the bootstrap store that gives
// up on a stale membership (worker/watched_store.h).

#include "worker/state_handover.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "transport/loopback/loopback_communicator.h"
#include "worker/watched_store.h"

namespace herd::worker {
namespace {

checkpoint::ProcessState Example() {
  checkpoint::ProcessState s;
  s.process = "worker-0";
  checkpoint::Extent param{"param/fc.weight", DType::kFloat32, 3, 0, std::string(12, '\1')};
  checkpoint::Extent momentum{"momentum/fc.weight", DType::kFloat32, 3, 1, std::string(8, '\2')};
  checkpoint::Extent residual{"residual/fc.weight", DType::kFloat32, 3, 0, std::string(12, '\3')};
  s.extents = {param, momentum, residual};
  s.values["density_warmup/iterations"] = "17";
  s.values["empty"] = "";
  return s;
}

TEST(StateHandover, EncodingRoundTrips) {
  const checkpoint::ProcessState s = Example();
  auto back = DecodeState(EncodeState(s));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->extents.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back->extents[i].name, s.extents[i].name);
    EXPECT_EQ(back->extents[i].total, s.extents[i].total);
    EXPECT_EQ(back->extents[i].offset, s.extents[i].offset);
    EXPECT_EQ(back->extents[i].bytes, s.extents[i].bytes);
  }
  EXPECT_EQ(back->values, s.values);
}

TEST(StateHandover, DamagedBytesAreRefusedNotRead) {
  const std::string good = EncodeState(Example());
  // Every truncation is an error, none reads past the end.
  for (size_t n = 0; n < good.size(); ++n) {
    auto got = DecodeState(std::string_view(good).substr(0, n));
    ASSERT_FALSE(got.ok()) << n;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss) << got.status();
  }
  EXPECT_FALSE(DecodeState(good + "x").ok()) << "bytes after the end";
  std::string bad_range = good;
  // The first extent's offset (after magic, count, name length + name, dtype, total).
  const size_t offset_at = 8 + 8 + 4 + std::string("param/fc.weight").size() + 1 + 8;
  bad_range[offset_at] = 2;  // elements [2, 5) of 3
  auto got = DecodeState(bad_range);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("do not fit"), std::string::npos) << got.status();
}

TEST(StateHandover, OwnStateIsDroppedAndCounted) {
  checkpoint::ProcessState s = Example();
  EXPECT_EQ(DropOwnState(s), 12);
  ASSERT_EQ(s.extents.size(), 2u);
  EXPECT_EQ(s.extents[1].name, "momentum/fc.weight");
}

TEST(StateHandover, EachJoinerIsServedByTheNearestHolderBeforeIt) {
  EXPECT_EQ(HandoverSource({false, true, false, false}, 1), 0);
  EXPECT_EQ(HandoverSource({true, false, false, false}, 0), 3) << "wraps: its ring predecessor";
  EXPECT_EQ(HandoverSource({false, true, true, false}, 2), 0);
  EXPECT_EQ(HandoverSource({true, true}, 0), -1) << "nobody holds the state";
}

TEST(StateHandover, TheFlagsAndTheStateCrossACommunicator) {
  constexpr int kRanks = 4;
  auto comms = transport::MakeLoopbackCommunicators(kRanks);
  const std::vector<bool> joins = {false, true, false, true};
  // Large enough for several chunks would take long here; the chunking is the same loop.
  const std::string state = EncodeState(Example());
  std::vector<std::vector<bool>> seen(kRanks);
  std::vector<std::string> got(kRanks);
  std::vector<absl::Status> errors(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      auto& comm = *comms[static_cast<size_t>(r)];
      const Deadline deadline = Deadline::After(std::chrono::seconds(10));
      auto flags = ExchangeJoining(comm, joins[static_cast<size_t>(r)], deadline);
      if (!flags.ok()) {
        errors[r] = flags.status();
        return;
      }
      seen[r] = *flags;
      if (joins[static_cast<size_t>(r)]) {
        auto bytes = ReceiveState(comm, HandoverSource(*flags, r), 1 << 20, deadline);
        if (bytes.ok()) got[r] = *bytes;
        errors[r] = bytes.status();
        return;
      }
      for (int j = 0; j < kRanks; ++j) {
        if ((*flags)[j] && HandoverSource(*flags, j) == r) {
          errors[r] = SendState(comm, j, state, deadline);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_TRUE(errors[r].ok()) << r << ": " << errors[r];
    EXPECT_EQ(seen[r], joins) << r;
  }
  EXPECT_EQ(got[1], state) << "from member 0";
  EXPECT_EQ(got[3], state) << "from member 2";
}

TEST(StateHandover, AnOversizedAnnouncementIsRefused) {
  auto comms = transport::MakeLoopbackCommunicators(2);
  const std::string state(1000, 'x');
  absl::Status sent;
  std::thread sender(
      [&] { sent = SendState(*comms[0], 1, state, Deadline::After(std::chrono::seconds(1))); });
  auto got = ReceiveState(*comms[1], 0, 100, Deadline::After(std::chrono::seconds(5)));
  sender.join();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kResourceExhausted) << got.status();
  EXPECT_NE(got.status().message().find("announces 1000 bytes"), std::string::npos) << got.status();
}

// ps_ec's handover on a communicator of two: the sender waits for the receiver's byte before it
// closes the communicator, and without it (no receiver) it gives up at its deadline.
TEST(StateHandover, TheSenderOfAOneOffHandoverWaitsForTheReceiversConfirmation) {
  auto comms = transport::MakeLoopbackCommunicators(2);
  const std::string state = EncodeState(Example());
  absl::Status sent;
  std::thread sender([&] {
    const Deadline deadline = Deadline::After(std::chrono::seconds(10));
    sent = SendState(*comms[0], 1, state, deadline);
    if (sent.ok()) sent = ConfirmReceived(*comms[0], 1, /*receiver=*/false, deadline);
  });
  const Deadline deadline = Deadline::After(std::chrono::seconds(10));
  auto got = ReceiveState(*comms[1], 0, 1 << 20, deadline);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, state);
  EXPECT_TRUE(ConfirmReceived(*comms[1], 0, /*receiver=*/true, deadline).ok());
  sender.join();
  EXPECT_TRUE(sent.ok()) << sent;

  auto alone = transport::MakeLoopbackCommunicators(2);
  const absl::Status unconfirmed = ConfirmReceived(*alone[0], 1, /*receiver=*/false,
                                                   Deadline::After(std::chrono::milliseconds(100)));
  EXPECT_EQ(unconfirmed.code(), absl::StatusCode::kDeadlineExceeded) << unconfirmed;
}

// The bootstrap store of an elastic stretch gives up once the membership moved on, and only then.
TEST(StateHandover, AStaleBootstrapGivesUpWhenTheMembershipMovesOn) {
  std::atomic<bool> moved{false};
  auto inner = transport::MakeInProcessStore();
  auto store = MakeMembershipWatchedStore(
      inner, [&] { return moved.load(); }, "worker 1");
  ASSERT_TRUE(inner->Set("there", "v").ok());
  auto got = store->Get("there", Deadline::After(std::chrono::seconds(5)));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "v");
  auto late = store->Get("missing", Deadline::After(std::chrono::milliseconds(700)));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded) << "not stale: waits";
  moved = true;
  const auto begin = std::chrono::steady_clock::now();
  auto stale = store->Get("missing", Deadline::After(std::chrono::seconds(30)));
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kUnavailable) << stale.status();
  EXPECT_NE(stale.status().message().find("membership changed"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(2));
  EXPECT_TRUE(store->Set("mine", "x").ok());
  EXPECT_EQ(*inner->Get("mine", Deadline::After(std::chrono::seconds(1))), "x");
}

}  // namespace
}  // namespace herd::worker
