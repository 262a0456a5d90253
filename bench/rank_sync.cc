#include "bench/rank_sync.h"

#include <cstring>

#include "absl/strings/str_format.h"
#include "common/status.h"

namespace herd::bench {

using transport::OpKind;
using transport::Request;
using transport::Tag;

absl::Status Barrier(transport::Communicator& comm, Deadline deadline) {
  const int p = comm.size(), r = comm.rank();
  uint32_t round = 0;
  for (int k = 1; k < p; k <<= 1, ++round) {
    // Consecutive barriers reuse the same tags: messages between one pair with one tag match
    // in send order, so a fast rank's next barrier cannot satisfy this one.
    const Tag tag = Tag::Make(OpKind::kBarrier, 0, round);
    std::byte out{0}, in{0};
    Request send = comm.isend((r + k) % p, tag, ConstBytes(&out, 1));
    Request recv = comm.irecv((r - k + p) % p, tag, MutableBytes(&in, 1));
    HERD_RETURN_IF_ERROR(comm.WaitAll({&send, &recv}, deadline));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::byte>> GatherBytes(transport::Communicator& comm, ConstBytes mine,
                                                   Deadline deadline) {
  const Tag tag = Tag::Make(OpKind::kUser, kReportTagId, 0);
  if (comm.rank() != 0) {
    Request send = comm.isend(0, tag, mine);
    HERD_RETURN_IF_ERROR(comm.WaitAll({&send}, deadline));
    return std::vector<std::byte>{};
  }
  const size_t n = mine.size();
  std::vector<std::byte> all(n * comm.size());
  std::memcpy(all.data(), mine.data(), n);
  std::vector<Request> recvs;
  for (int peer = 1; peer < comm.size(); ++peer) {
    recvs.push_back(comm.irecv(peer, tag, MutableBytes(all.data() + peer * n, n)));
  }
  HERD_RETURN_IF_ERROR(comm.WaitAll(absl::MakeSpan(recvs), deadline));
  for (size_t i = 0; i < recvs.size(); ++i) {
    if (recvs[i].received() != n) {
      return absl::DataLossError(
          absl::StrFormat("benchmark report from rank %u arrived with %u bytes, expected %u", i + 1,
                          recvs[i].received(), n));
    }
  }
  return all;
}

}  // namespace herd::bench
