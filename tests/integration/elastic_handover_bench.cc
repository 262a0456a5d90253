// What handing an elastic job's state to a joining worker costs against the link (a benchmark,
// label slow; docs/BENCHMARKS.md, "Elastic membership"): two UCX processes, the state of N
// bytes (one extent, as a model's parameters and optimizer slots export), handed over the way
// a rejoin does it (worker/state_handover.h: the joining flags, the source's encoding, the size
// and the chunks, the joiner's decoding) against one raw message of N bytes on the same link.
// Printed as a table; the decoded state is checked.

#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "tests/integration/process_ranks.h"
#include "worker/state_handover.h"

namespace herd::worker {
namespace {

using namespace std::chrono_literals;
using transport::Communicator;
using transport::OpKind;
using transport::Tag;

constexpr size_t kSizes[] = {size_t{2} << 20, size_t{16} << 20, size_t{64} << 20,
                             size_t{256} << 20};
constexpr int kRounds = 3;  // the best of them: the machine is shared

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Both ranks start a measurement together.
absl::Status Sync(Communicator& c, uint32_t step) {
  uint32_t go = 0;
  const Tag tag = Tag::Make(OpKind::kUser, 7, step);
  transport::Request r =
      c.rank() == 0 ? c.irecv(1, tag, AsMutableBytes(&go, 4)) : c.isend(0, tag, AsBytes(&go, 4));
  return c.wait(r, Deadline::After(60s));
}

absl::Status Measure(Communicator& c, herd::testing::ParentChannel& parent) {
  uint32_t step = 0;
  for (size_t bytes : kSizes) {
    checkpoint::ProcessState state;
    state.process = "worker-0";
    if (c.rank() == 0) {
      checkpoint::Extent e{"param/w", DType::kFloat32, static_cast<int64_t>(bytes / 4), 0,
                           std::string(bytes, '\0')};
      for (size_t i = 0; i < bytes; i += 4096) e.bytes[i] = static_cast<char>(i / 4096);
      state.extents.push_back(std::move(e));
      state.values["density_warmup/iterations"] = "3";
    }
    double link = 1e9, handover = 1e9;
    std::vector<char> raw(bytes);
    for (int round = 0; round < kRounds; ++round) {
      // The link: one message of the same size.
      HERD_RETURN_IF_ERROR(Sync(c, ++step));
      auto begin = Clock::now();
      const Tag tag = Tag::Make(OpKind::kUser, 8, step);
      transport::Request r = c.rank() == 0 ? c.isend(1, tag, AsBytes(raw.data(), bytes))
                                           : c.irecv(0, tag, AsMutableBytes(raw.data(), bytes));
      HERD_RETURN_IF_ERROR(c.wait(r, Deadline::After(60s)));
      link = std::min(link, Seconds(Clock::now() - begin));
      // The handover: rank 1 joins, rank 0 holds the state.
      HERD_RETURN_IF_ERROR(Sync(c, ++step));
      begin = Clock::now();
      const Deadline deadline = Deadline::After(60s);
      HERD_ASSIGN_OR_RETURN(std::vector<bool> joining, ExchangeJoining(c, c.rank() == 1, deadline));
      if (c.rank() == 0) {
        HERD_RETURN_IF_ERROR(SendState(c, 1, EncodeState(state), deadline));
      } else {
        HERD_ASSIGN_OR_RETURN(std::string got,
                              ReceiveState(c, HandoverSource(joining, 1), 2 * bytes, deadline));
        HERD_ASSIGN_OR_RETURN(checkpoint::ProcessState back, DecodeState(got));
        handover = std::min(handover, Seconds(Clock::now() - begin));
        if (back.extents.size() != 1 || back.extents[0].bytes.size() != bytes ||
            back.extents[0].bytes[4096 * 5] != 5) {
          return absl::DataLossError(
              absl::StrFormat("the state of %d bytes arrived damaged", bytes));
        }
      }
    }
    if (c.rank() == 1) {
      parent.Write(absl::StrFormat("size %d link %.6f handover %.6f", bytes, link, handover));
    }
  }
  return absl::OkStatus();
}

TEST(ElasticHandoverBench, StateHandoverAgainstTheLink) {
  std::cout << "state handover to a joining worker vs one raw message of the same size; "
               "2 UCX processes, best of "
            << kRounds << "\n";
  std::cout << absl::StrFormat("%-20s %10s %12s %14s %16s %8s\n", "link", "state", "link GB/s",
                               "bytes/link ms", "handover ms", "ratio");
  for (bool separate : {false, true}) {
    herd::testing::ProcessRanksOptions options;
    options.size = 2;
    options.timeout = 300s;
    options.separate_hosts = separate;
    auto outcomes = herd::testing::RunProcessRanks(options, Measure);
    for (const auto& o : outcomes) {
      ASSERT_TRUE(o.exited && o.exit_code == 0 && o.status.ok()) << o.Describe();
    }
    for (const std::string& line : outcomes[1].lines) {
      unsigned long long bytes = 0;
      double link = 0, handover = 0;
      if (std::sscanf(line.c_str(), "size %llu link %lf handover %lf", &bytes, &link, &handover) !=
          3) {
        continue;
      }
      std::cout << absl::StrFormat("%-20s %7d MiB %12.2f %14.2f %16.2f %8.2f\n",
                                   separate ? "two hosts (TCP lo)" : "same host (shm)", bytes >> 20,
                                   static_cast<double>(bytes) / link / 1e9, 1e3 * link,
                                   1e3 * handover, handover / link);
    }
  }
}

}  // namespace
}  // namespace herd::worker
