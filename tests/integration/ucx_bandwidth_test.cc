// Throughput of the UCX backend between two processes of this machine: one-way streaming and
// ping-pong of 4-64 MiB messages, printed as a table; every message's content is checked.
//
// It runs the two same-host modes (eager fragments through the shared-memory FIFO, and UCX's
// zero-copy rendezvous) and the cross-host path (TCP loopback); HERD_UCX_BENCH_BUSY=1 adds the
// same-host modes with busy polling, to show what sleeping on the event fd costs. The figures
// depend on what else runs on the machine.

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "algorithms/collectives/allreduce.h"
#include "tests/integration/process_ranks.h"

namespace herd::transport {
namespace {

using namespace std::chrono_literals;

constexpr size_t kSizes[] = {size_t{4} << 20, size_t{16} << 20, size_t{64} << 20};
constexpr size_t kStreamBytes = size_t{512} << 20;  // per size: at least 8 messages
constexpr int kPingPongs = 6;

struct Mode {
  const char* name;
  bool zero_copy;
  bool busy_poll;
  bool separate_hosts = false;  // as if on two machines: TCP loopback
};

uint32_t Word(size_t i, uint32_t message) {
  return static_cast<uint32_t>(i * 2654435761u) ^ (message * 0x9e3779b9u);
}

void Fill(std::vector<uint32_t>& v, uint32_t message) {
  for (size_t i = 0; i < v.size(); ++i) v[i] = Word(i, message);
}

absl::Status Check(const std::vector<uint32_t>& v, uint32_t message) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] != Word(i, message)) {
      return absl::DataLossError(absl::StrFormat("message %d differs at word %d", message, i));
    }
  }
  return absl::OkStatus();
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Rank 0 sends, rank 1 receives; both sides keep two messages in flight.
absl::Status Stream(Communicator& c, size_t bytes, herd::testing::ParentChannel& parent) {
  const size_t words = bytes / 4;
  const uint32_t messages = static_cast<uint32_t>(std::max<size_t>(8, kStreamBytes / bytes));
  std::vector<uint32_t> buf[2] = {std::vector<uint32_t>(words), std::vector<uint32_t>(words)};
  const Deadline deadline = Deadline::After(60s);
  uint32_t go = 0;
  // A zero-byte handshake so that both sides start together.
  Tag sync = Tag::Make(OpKind::kUser, 1, static_cast<uint32_t>(bytes >> 20));
  Request h =
      c.rank() == 0 ? c.irecv(1, sync, AsMutableBytes(&go, 4)) : c.isend(0, sync, AsBytes(&go, 4));
  if (absl::Status st = c.wait(h, deadline); !st.ok()) return st;
  if (c.rank() == 0) {
    Fill(buf[0], 0);
    Fill(buf[1], messages - 1);
  }
  const auto start = Clock::now();
  Request inflight[2];
  for (uint32_t m = 0; m < messages; ++m) {
    Request& slot = inflight[m % 2];
    if (absl::Status st = c.wait(slot, deadline); !st.ok()) return st;
    // Rank 1 checks the first message before its buffer is reused.
    if (c.rank() == 1 && m == 2) {
      if (absl::Status st = Check(buf[0], 0); !st.ok()) return st;
    }
    // The sender's buffers hold message 0 and message `messages - 1`; the middle ones repeat
    // them, which is fine for throughput and keeps the check cheap.
    uint32_t which = (m == messages - 1) ? 1 : 0;
    Tag tag = Tag::Make(OpKind::kUser, 2, m);
    slot = c.rank() == 0 ? c.isend(1, tag, AsBytes(buf[which].data(), bytes))
                         : c.irecv(0, tag, AsMutableBytes(buf[m % 2].data(), bytes));
  }
  for (Request& r : inflight) {
    if (absl::Status st = c.wait(r, deadline); !st.ok()) return st;
  }
  const double seconds = Seconds(Clock::now() - start);
  if (c.rank() == 1) {
    if (absl::Status st = Check(buf[(messages - 1) % 2], messages - 1); !st.ok()) return st;
    parent.Write(absl::StrFormat("stream %d %.3f", bytes >> 20, messages * bytes / seconds / 1e9));
  }
  return absl::OkStatus();
}

// Rank 0 sends a message, rank 1 sends it back; one-way rate = bytes / (round trip / 2).
absl::Status PingPong(Communicator& c, size_t bytes, herd::testing::ParentChannel& parent) {
  std::vector<uint32_t> buf(bytes / 4);
  if (c.rank() == 0) Fill(buf, 7);
  const Deadline deadline = Deadline::After(60s);
  Clock::time_point start;
  for (int i = -1; i < kPingPongs; ++i) {  // round -1 warms up
    if (i == 0) start = Clock::now();
    Tag ping = Tag::Make(OpKind::kUser, 3, static_cast<uint32_t>(i + 1));
    Tag pong = Tag::Make(OpKind::kUser, 4, static_cast<uint32_t>(i + 1));
    const int other = 1 - c.rank();
    Request r = c.irecv(other, c.rank() == 0 ? pong : ping, AsMutableBytes(buf.data(), bytes));
    if (c.rank() == 0) {
      Request s = c.isend(other, ping, AsBytes(buf.data(), bytes));
      if (absl::Status st = c.WaitAll({&s, &r}, deadline); !st.ok()) return st;
    } else {
      if (absl::Status st = c.wait(r, deadline); !st.ok()) return st;
      Request s = c.isend(other, pong, AsBytes(buf.data(), bytes));
      if (absl::Status st = c.wait(s, deadline); !st.ok()) return st;
    }
  }
  const double seconds = Seconds(Clock::now() - start);
  if (c.rank() == 0) {
    if (absl::Status st = Check(buf, 7); !st.ok()) return st;
    parent.Write(
        absl::StrFormat("pingpong %d %.3f", bytes >> 20, 2.0 * kPingPongs * bytes / seconds / 1e9));
  }
  return absl::OkStatus();
}

TEST(UcxBandwidthTest, TwoProcessesStreamingAndPingPong) {
  std::vector<Mode> modes = {{"copy (default)", false, false},
                             {"zero-copy", true, false},
                             {"two hosts (TCP lo)", false, false, true}};
  const char* busy = std::getenv("HERD_UCX_BENCH_BUSY");
  if (busy != nullptr && std::string(busy) == "1") {
    modes.push_back({"copy, busy poll", false, true});
    modes.push_back({"zero-copy, busy poll", true, true});
  }
  std::cout << "UCX backend, 2 processes on this host; GB/s (1e9 bytes/s)\n";
  std::cout << absl::StrFormat("%-22s %-9s %8s %8s %8s\n", "mode", "pattern", "4 MiB", "16 MiB",
                               "64 MiB");
  for (const Mode& mode : modes) {
    herd::testing::ProcessRanksOptions options;
    options.size = 2;
    options.timeout = 120s;
    options.ucx.same_host_zero_copy = mode.zero_copy;
    options.ucx.busy_poll = mode.busy_poll;
    options.separate_hosts = mode.separate_hosts;
    auto outcomes = herd::testing::RunProcessRanks(
        options, [](Communicator& c, herd::testing::ParentChannel& parent) -> absl::Status {
          for (size_t bytes : kSizes) {
            if (absl::Status st = Stream(c, bytes, parent); !st.ok()) return st;
            if (absl::Status st = PingPong(c, bytes, parent); !st.ok()) return st;
          }
          return absl::OkStatus();
        });
    for (const auto& o : outcomes) {
      ASSERT_TRUE(o.exited && o.exit_code == 0 && o.status.ok())
          << mode.name << ": " << o.Describe();
    }
    for (const char* pattern : {"stream", "pingpong"}) {
      std::string row = absl::StrFormat("%-22s %-9s", mode.name, pattern);
      for (size_t bytes : kSizes) {
        std::string key = absl::StrFormat("%s %d", pattern, bytes >> 20);
        std::string value = "?";
        for (const auto& o : outcomes) {
          for (const std::string& line : o.lines) {
            if (line.rfind(key + " ", 0) == 0) value = line.substr(key.size() + 1);
          }
        }
        row += absl::StrFormat(" %8s", value);
      }
      std::cout << row << "\n";
    }
  }
}

// Algorithm bandwidth (bytes of the vector / time) of RingAllReduce among 4 processes, fp32 sum,
// for comparison with MPI_Allreduce in NOTES.md. Checks the result of the last iteration.
TEST(UcxBandwidthTest, RingAllReduceAmongFourProcesses) {
  static constexpr size_t kBytes[] = {size_t{16} << 20, size_t{64} << 20};
  static constexpr int kIterations = 5;
  std::cout << "RingAllReduce, 4 processes on this host, fp32 sum; algorithm GB/s\n";
  for (bool zero_copy : {false, true}) {
    herd::testing::ProcessRanksOptions options;
    options.size = 4;
    options.timeout = 120s;
    options.ucx.same_host_zero_copy = zero_copy;
    auto outcomes = herd::testing::RunProcessRanks(
        options, [](Communicator& c, herd::testing::ParentChannel& parent) -> absl::Status {
          for (size_t bytes : kBytes) {
            std::vector<float> data(bytes / 4);
            collectives::AllReduceOptions o;
            o.comm = &c;
            o.data = data.data();
            o.count = data.size();
            o.timeout = 60s;
            Clock::time_point start;
            for (int i = -1; i < kIterations; ++i) {  // round -1 warms up
              if (i == 0) start = Clock::now();
              std::fill(data.begin(), data.end(), static_cast<float>(c.rank() + 1));
              if (absl::Status st = collectives::RingAllReduce(o); !st.ok()) return st;
            }
            const double seconds = Seconds(Clock::now() - start);
            for (float x : data) {
              if (x != 10.0f) return absl::DataLossError("wrong all-reduce result");
            }
            if (c.rank() == 0) {
              parent.Write(absl::StrFormat("allreduce %d %.3f", bytes >> 20,
                                           kIterations * bytes / seconds / 1e9));
            }
          }
          return absl::OkStatus();
        });
    std::string row = absl::StrFormat("%-16s", zero_copy ? "zero-copy" : "copy (default)");
    for (const auto& o : outcomes) {
      ASSERT_TRUE(o.exited && o.exit_code == 0 && o.status.ok()) << o.Describe();
      for (const std::string& line : o.lines) row += "  " + line.substr(10) + " GB/s";
    }
    std::cout << row << " (MiB GB/s)\n";
  }
}

}  // namespace
}  // namespace herd::transport
