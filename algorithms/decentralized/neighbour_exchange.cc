#include "algorithms/decentralized/neighbour_exchange.h"

#include <memory>
#include <string>

#include "absl/strings/str_format.h"
#include "algorithms/collectives/internal.h"
#include "common/status.h"

namespace herd::decentralized::internal {

using transport::OpKind;
using transport::Request;
using transport::Tag;

absl::Status RunSegmentedExchange(const SegmentedExchange& x) {
  transport::Communicator& comm = *x.comm;
  const std::vector<int>& send_to = x.send_to.empty() ? x.peers : x.send_to;
  const size_t d = x.peers.size(), S = x.segments;
  if (d == 0 || S == 0) return absl::OkStatus();
  // Sends are waited for in slots of their own, as many as receives.
  if (send_to.size() != d) {
    return absl::InternalError(
        absl::StrFormat("%s: %d receivers but %d senders", x.what, send_to.size(), d));
  }
  // Slot (k % kWindow, peer i) holds segment k's payload from peers[i].
  auto scratch = std::make_unique_for_overwrite<std::byte[]>(kWindow * d * x.max_recv_bytes);
  auto at = [&](size_t k, size_t i) {
    return scratch.get() + ((k % kWindow) * d + i) * x.max_recv_bytes;
  };
  std::vector<Request> recvs(kWindow * d), sends(kWindow * d);
  auto index = [&](size_t k, size_t i) { return (k % kWindow) * d + i; };

  auto post = [&](size_t k) {
    const Tag tag =
        Tag::Make(OpKind::kDecentralized, x.tag, static_cast<uint32_t>(x.first_segment_tag + k));
    const size_t n = x.recv_bytes(k);
    // Receives first, so a peer's send finds a posted buffer (rendezvous transports).
    for (size_t i = 0; i < d && n > 0; ++i) {
      recvs[index(k, i)] = comm.irecv(x.peers[i], tag, AsMutableBytes(at(k, i), n));
    }
    const ConstBytes out = x.prepare(k);
    for (size_t i = 0; i < d && !out.empty(); ++i) {
      sends[index(k, i)] = comm.isend(send_to[i], tag, out);
    }
  };

  for (size_t k = 0; k < S && k < kWindow; ++k) post(k);
  std::vector<ConstBytes> received(d);
  for (size_t k = 0; k < S; ++k) {
    const size_t n = x.recv_bytes(k);
    for (size_t i = 0; i < d; ++i) {
      if (n > 0) {
        HERD_RETURN_IF_ERROR(
            collectives::internal::WaitRecv(comm, recvs[index(k, i)], n, x.deadline, x.what));
      }
      received[i] = AsBytes(at(k, i), n);
    }
    for (size_t i = 0; i < d; ++i) {
      HERD_RETURN_IF_ERROR(collectives::internal::WaitSend(comm, sends[index(k, i)], x.deadline));
    }
    if (absl::Status st = x.finish(k, received); !st.ok()) {
      return collectives::internal::Fail(comm, std::move(st));
    }
    if (k + kWindow < S) post(k + kWindow);
  }
  return absl::OkStatus();
}

absl::Status ValidatePeers(std::string_view what, const std::vector<int>& peers, int rank,
                           int size) {
  for (size_t i = 0; i < peers.size(); ++i) {
    const int p = peers[i];
    if (p < 0 || p >= size || p == rank || (i > 0 && p <= peers[i - 1])) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: peer %d (position %d) of rank %d is invalid: peers must be distinct ranks in "
          "[0, %d), ascending, without this rank",
          what, p, i, rank, size));
    }
  }
  return absl::OkStatus();
}

}  // namespace herd::decentralized::internal
