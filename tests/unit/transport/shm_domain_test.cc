// transport/shm/shm_domain.h between two real processes (the test and a forked child): a lane
// shared through the segment, and every way a member can go away (killed, aborted, closed), each
// named by the member that waits for it; a segment left by a leader killed before everyone
// attached is removed by the next leader.

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "transport/shm/shm_domain.h"

namespace herd::transport::shm {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr char kIdentity[] = "shm-domain-test";

JoinOptions Options(pid_t leader, pid_t other, int index, uint64_t nonce) {
  JoinOptions o;
  o.members = {{0, leader}, {1, other}};
  o.index = index;
  o.identity = kIdentity;
  o.nonce = nonce;
  o.config.lanes = 2;
  o.config.stages = 2;
  o.config.stage_bytes = 8192;
  return o;
}

uint64_t Nonce() {
  return static_cast<uint64_t>(::getpid()) * 0x9e3779b97f4a7c15ull ^ ::time(nullptr);
}

// Forks a child that runs `body` (its exit code) as member 1 of a domain led by this process.
pid_t Child(const std::function<int()>& body) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  return pid;
}

int Reap(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool Exists(const std::string& shm_name) {
  struct stat st {};
  return ::stat(("/dev/shm" + shm_name).c_str(), &st) == 0;
}

TEST(ShmDomainTest, TwoProcessesShareALane) {
  const uint64_t nonce = Nonce();
  const pid_t me = ::getpid();
  const pid_t child = Child([&] {
    auto d = Domain::Join(Options(me, ::getpid(), 1, nonce), Deadline::After(10s));
    if (!d.ok()) return 2;
    auto op = (*d)->Enter(Domain::Key(1, 7, 0), 42, Deadline::After(10s), "test");
    if (!op.ok()) return 3;
    std::memset(op->stage(1, 0), 0x5a, 8192);
    op->Publish(LaneOp::kIn, 1);
    // Wait until the leader has read it, then leave.
    auto leader_done = [&] { return op->Get(0, LaneOp::kDone) >= 1 ? -1 : 0; };
    if (!op->Wait(leader_done, Deadline::After(10s), "test").ok()) return 4;
    op->Leave();
    return 0;
  });
  auto d = Domain::Join(Options(me, child, 0, nonce), Deadline::After(10s));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ((*d)->size(), 2);
  EXPECT_FALSE(Exists((*d)->name())) << "the leader unlinks the name once everyone attached";
  auto op = (*d)->Enter(Domain::Key(1, 7, 0), 42, Deadline::After(10s), "test");
  ASSERT_TRUE(op.ok()) << op.status();
  auto child_in = [&] { return op->Get(1, LaneOp::kIn) >= 1 ? -1 : 1; };
  ASSERT_TRUE(op->Wait(child_in, Deadline::After(10s), "test").ok());
  EXPECT_EQ(op->stage(1, 0)[8191], std::byte{0x5a});
  op->Publish(LaneOp::kDone, 1);
  op->Leave();
  EXPECT_EQ(Reap(child), 0);
}

// The child joins, enters the lane, then does `leave` (dies, aborts or closes); the leader waits
// for a counter the child never publishes and must fail naming rank 1 with `expected`.
void ExpectNamed(const std::function<void(std::unique_ptr<Domain>&)>& leave,
                 const std::string& expected) {
  const uint64_t nonce = Nonce();
  const pid_t me = ::getpid();
  const pid_t child = Child([&] {
    auto d = Domain::Join(Options(me, ::getpid(), 1, nonce), Deadline::After(10s));
    if (!d.ok()) return 2;
    auto op = (*d)->Enter(Domain::Key(2, 1, 0), 1, Deadline::After(10s), "test");
    if (!op.ok()) return 3;
    std::this_thread::sleep_for(50ms);
    leave(*d);
    std::this_thread::sleep_for(2s);  // stays alive (but silent) unless it died
    return 0;
  });
  auto d = Domain::Join(Options(me, child, 0, nonce), Deadline::After(10s));
  ASSERT_TRUE(d.ok()) << d.status();
  auto op = (*d)->Enter(Domain::Key(2, 1, 0), 1, Deadline::After(10s), "waiting");
  ASSERT_TRUE(op.ok()) << op.status();
  const auto start = std::chrono::steady_clock::now();
  absl::Status st = op->Wait([&] { return op->Get(1, LaneOp::kIn) >= 1 ? -1 : 1; },
                             Deadline::After(20s), "waiting");
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("waiting: rank 1"));
  EXPECT_THAT(std::string(st.message()), HasSubstr(expected));
  EXPECT_LT(took, 1500ms) << st;
  ::kill(child, SIGKILL);
  Reap(child);
}

TEST(ShmDomainTest, AKilledMemberIsNamed) {
  ExpectNamed([](std::unique_ptr<Domain>&) { ::raise(SIGKILL); }, "on this host) died");
}

TEST(ShmDomainTest, AnAbortIsPublishedWithItsReason) {
  ExpectNamed([](std::unique_ptr<Domain>& d) { d->Abort(absl::UnavailableError("boom")); },
              "aborted its communicator: boom");
}

TEST(ShmDomainTest, ClosingIsPublished) {
  ExpectNamed([](std::unique_ptr<Domain>& d) { d.reset(); }, "closed its communicator");
}

TEST(ShmDomainTest, DifferentArgumentsAreRefused) {
  const uint64_t nonce = Nonce();
  const pid_t me = ::getpid();
  const pid_t child = Child([&] {
    auto d = Domain::Join(Options(me, ::getpid(), 1, nonce), Deadline::After(10s));
    if (!d.ok()) return 2;
    std::this_thread::sleep_for(200ms);  // the leader claims first
    auto op = (*d)->Enter(Domain::Key(3, 1, 0), 2, Deadline::After(10s), "test");
    return op.status().code() == absl::StatusCode::kInvalidArgument ? 0 : 3;
  });
  auto d = Domain::Join(Options(me, child, 0, nonce), Deadline::After(10s));
  ASSERT_TRUE(d.ok()) << d.status();
  auto op = (*d)->Enter(Domain::Key(3, 1, 0), 1, Deadline::After(10s), "test");
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ(Reap(child), 0);
}

TEST(ShmDomainTest, ASegmentLeftByAKilledLeaderIsRemoved) {
  // The child leads a domain whose other member (this process) never attaches: it waits in
  // Join with the name in /dev/shm until it is killed.
  const uint64_t nonce = Nonce();
  const pid_t me = ::getpid();
  const pid_t child = Child([&] {
    auto d = Domain::Join(Options(::getpid(), me, 0, nonce), Deadline::After(30s));
    return d.ok() ? 0 : 2;
  });
  const std::string name = absl::StrFormat("/%s%d-%016x", Domain::SegmentPrefix(), child, nonce);
  for (int i = 0; i < 500 && !Exists(name); ++i) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(Exists(name)) << name;
  ::kill(child, SIGKILL);
  Reap(child);
  ASSERT_TRUE(Exists(name)) << "a leader killed before everyone attached leaves its name";
  // The next leader on this host removes it before it creates its own.
  JoinOptions alone;
  alone.members = {{0, ::getpid()}};
  alone.identity = kIdentity;
  alone.nonce = nonce + 1;
  auto d = Domain::Join(alone, Deadline::After(10s));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(Exists(name));
  EXPECT_EQ(Domain::RemoveStaleSegments(), 0);
}

}  // namespace
}  // namespace herd::transport::shm
