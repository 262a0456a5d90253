// Spar-Reduce-Scatter. Per round (see SrsSchedule for why the blocks line up):
//   1. post the receives of the round (one frame per block, sized for k entries);
//   2. for each block of the bag: top-k, move it out of w, send it at once (so the wire carries
//      block j while block j+1 is being selected);
//   3. add each received block into w (the blocks received are never the ones being sent);
//   4. wait for the sends, so that the frames can be reused by the next round.
// Each block is one message whose tag step is its transfer number (SrsRound::first_transfer
// + j): sender and receiver number the transfers of a round alike.

#include "algorithms/sparse/spar_reduce_scatter.h"

#include <vector>

#include "common/status.h"

namespace herd::sparse {

using transport::Request;

absl::Status SparReduceScatter(Wire& wire, const Group& team, const BlockLayout& layout, size_t k,
                               TopkMethod method, WorkingVector& w, CooBlock* own,
                               TopkScratch* scratch) {
  const int Q = team.size, me = team.me;
  const size_t frame_max = MaxFrameBytes(1, k);
  std::vector<std::vector<std::byte>> in, out;
  std::vector<Request> recvs, sends;
  CooBlock picked, got;
  for (const SrsRound& round : SrsSchedule(Q)) {
    const int bag = round.bag;
    const int to = team.Rank(me + round.distance), from = team.Rank(me - round.distance);
    in.resize(bag);
    out.resize(bag);
    recvs.assign(bag, Request());
    sends.assign(bag, Request());
    for (int j = 0; j < bag; ++j) {
      in[j].resize(frame_max);
      recvs[j] = wire.Recv(from, Phase::kReduceScatter, round.first_transfer + j,
                           AsMutableBytes(in[j].data(), in[j].size()));
    }
    for (int j = 0; j < bag; ++j) {
      const int b = (me + round.distance + j) % Q;
      w.TakeTopK(b, k, method, &picked, scratch);
      const CooBlock* frame[] = {&picked};
      EncodeFrame(frame, &out[j]);
      sends[j] = wire.Send(to, Phase::kReduceScatter, round.first_transfer + j,
                           AsBytes(out[j].data(), out[j].size()));
    }
    for (int j = 0; j < bag; ++j) {
      const int b = (me + j) % Q;
      HERD_ASSIGN_OR_RETURN(size_t bytes, wire.WaitRecv(recvs[j]));
      CooBlock* into[] = {&got};
      const size_t limit[] = {layout.length(b)};
      if (absl::Status s = DecodeFrame(ConstBytes(in[j].data(), bytes), k, limit, into); !s.ok()) {
        return wire.BadFrame(from, Phase::kReduceScatter, round.first_transfer + j, s);
      }
      w.Add(b, got);
    }
    HERD_RETURN_IF_ERROR(wire.WaitSends(absl::MakeSpan(sends)));
  }
  // The end of the procedure: the own block, now reduced over the team, is cut to k once more.
  w.TakeTopK(me, k, method, own, scratch);
  return absl::OkStatus();
}

}  // namespace herd::sparse
