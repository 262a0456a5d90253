#include "algorithms/sparse/sparse_bruck.h"

#include <algorithm>

#include "common/status.h"

namespace herd::sparse {

using transport::Request;

absl::Status SparseBruckAllGather(Wire& wire, Phase phase, const Group& group, size_t max_entries,
                                  const std::function<size_t(int member)>& limit,
                                  std::vector<CooBlock>* blocks) {
  const int G = group.size, me = group.me;
  blocks->resize(G);
  // Position q of this member is member me + q: positions [0, d) are held after the rounds
  // with distances below d.
  auto member_at = [&](int q) { return (me + q) % G; };
  std::vector<std::byte> out, in;
  std::vector<const CooBlock*> sending;
  std::vector<CooBlock*> receiving;
  std::vector<size_t> limits;
  uint32_t step = 0;
  for (int d = 1; d < G; d <<= 1, ++step) {
    const int n = std::min(d, G - d);
    sending.clear();
    receiving.clear();
    limits.clear();
    for (int q = 0; q < n; ++q) {
      sending.push_back(&(*blocks)[member_at(q)]);
      receiving.push_back(&(*blocks)[member_at(d + q)]);
      limits.push_back(limit(member_at(d + q)));
    }
    const int from = group.Rank(me + d), to = group.Rank(me - d);
    in.resize(MaxFrameBytes(n, max_entries));
    Request recv = wire.Recv(from, phase, step, AsMutableBytes(in.data(), in.size()));
    EncodeFrame(sending, &out);
    Request send = wire.Send(to, phase, step, AsBytes(out.data(), out.size()));
    HERD_ASSIGN_OR_RETURN(size_t got, wire.WaitRecv(recv));
    if (absl::Status s = DecodeFrame(ConstBytes(in.data(), got), max_entries, limits, receiving);
        !s.ok()) {
      return wire.BadFrame(from, phase, step, s);
    }
    HERD_RETURN_IF_ERROR(wire.WaitSend(send));
  }
  return absl::OkStatus();
}

}  // namespace herd::sparse
