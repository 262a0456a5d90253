#pragma once
// Real processes as ranks: forks one child per rank, each of which builds a UCX communicator
// over a FileStore in a fresh temporary directory and runs a body. The parent waits with a
// timeout, kills what is left, and returns how every child ended and what it reported.
//
// Fork safety: call RunProcessRanks from a process that has created no thread and no UCX
// context yet (a gtest case of its own, as ctest runs them); the children create their own.

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "transport/communicator.h"
#include "transport/ucx/ucx_communicator.h"

namespace herd::testing {

// The child's line to the parent; Write() sends at once, so what a rank writes before it
// dies still arrives.
class ParentChannel {
 public:
  explicit ParentChannel(int fd) : fd_(fd) {}
  void Write(std::string_view line);
  // Writes "<key> <CLOCK_MONOTONIC nanoseconds>": comparable between processes of one host.
  void Stamp(std::string_view key);

 private:
  int fd_;
};

using RankBody = std::function<absl::Status(transport::Communicator& comm, ParentChannel& parent)>;

struct ProcessRanksOptions {
  int size = 4;
  std::chrono::milliseconds timeout{std::chrono::seconds(90)};  // for the whole group
  transport::UcxOptions ucx;
  // Give every rank its own host identity (HERD_UCX_HOST_ID): the ranks then connect as if
  // on different machines, over TCP loopback with peer error handling on every endpoint.
  bool separate_hosts = false;
  // > 0: ranks [k G, (k+1) G) share the host identity test-host-k (G = ranks_per_host): hosts of
  // G ranks each, shared memory within a host, TCP between hosts.
  int ranks_per_host = 0;
};

struct RankOutcome {
  int rank = 0;
  bool exited = false;             // exited on its own (else killed by a signal)
  int exit_code = -1;              // 0: body OK, 1: body failed, 2: no communicator
  int signal = 0;                  // the signal that ended it, if !exited
  bool killed_by_parent = false;   // still running at the timeout
  absl::Status status;             // what the body returned (as reported)
  std::vector<std::string> lines;  // everything else it wrote

  // The value of "<key> <number>" among the lines, or -1.
  int64_t Stamp(std::string_view key) const;
  std::string Describe() const;  // for test failure messages
};

std::vector<RankOutcome> RunProcessRanks(const ProcessRanksOptions& options, const RankBody& body);

// Steady-clock nanoseconds (CLOCK_MONOTONIC), the unit of ParentChannel::Stamp.
int64_t MonotonicNanos();

}  // namespace herd::testing
