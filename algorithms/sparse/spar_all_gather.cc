#include "algorithms/sparse/spar_all_gather.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "algorithms/sparse/sparse_bruck.h"
#include "common/status.h"

namespace herd::sparse {
namespace {

using transport::Request;

void Start(BsagState* s, int teams) {
  if (s->ratio > 0) return;
  s->ratio = 1.0 / teams;
  s->step = 1.0 / teams;
  s->direction = 0;
}

}  // namespace

absl::Status RecursiveSag(Wire& wire, const Group& across, size_t k, TopkMethod method,
                          WorkingVector& w, int block, size_t length, CooBlock* own,
                          TopkScratch* scratch) {
  const size_t limit[] = {length};
  std::vector<std::byte> out, in(MaxFrameBytes(1, k));
  CooBlock theirs, sum, dropped;
  for (int s = 0; (1 << s) < across.size; ++s) {
    const int peer = across.Rank(across.me ^ (1 << s));
    Request recv = wire.Recv(peer, Phase::kSag, static_cast<uint32_t>(s),
                             AsMutableBytes(in.data(), in.size()));
    const CooBlock* frame[] = {own};
    EncodeFrame(frame, &out);
    Request send =
        wire.Send(peer, Phase::kSag, static_cast<uint32_t>(s), AsBytes(out.data(), out.size()));
    HERD_ASSIGN_OR_RETURN(size_t bytes, wire.WaitRecv(recv));
    CooBlock* into[] = {&theirs};
    if (absl::Status st = DecodeFrame(ConstBytes(in.data(), bytes), k, limit, into); !st.ok()) {
      return wire.BadFrame(peer, Phase::kSag, static_cast<uint32_t>(s), st);
    }
    HERD_RETURN_IF_ERROR(wire.WaitSend(send));
    // Both sides now hold the same pair of blocks and compute the same sum and selection.
    MergeSum(*own, theirs, &sum);
    SplitTopK(sum, k, method, own, &dropped, scratch);
    w.Add(block, dropped, std::ldexp(1.0f, -(s + 1)));
  }
  return absl::OkStatus();
}

absl::Status BruckSag(Wire& wire, const Group& across, size_t k, TopkMethod method,
                      BsagState* state, WorkingVector& w, int block, size_t length, CooBlock* own,
                      TopkScratch* scratch) {
  const int T = across.size;
  BsagState fresh;
  BsagState& st = state != nullptr ? *state : fresh;
  Start(&st, T);

  // The extra top-k: what this rank holds back stays its own residual.
  std::vector<CooBlock> blocks(T);
  CooBlock held_back;
  SplitTopK(*own, BsagKeep(st, k, T), method, &blocks[across.me], &held_back, scratch);
  w.Add(block, held_back);

  // Peers may run a different k' (a state restarted elsewhere): accept up to k entries.
  HERD_RETURN_IF_ERROR(SparseBruckAllGather(
      wire, Phase::kSag, across, k, [length](int) { return length; }, &blocks));
  // Team order, on every member: the same additions in the same order, the same bits.
  CooBlock sum = std::move(blocks[0]), next, dropped;
  for (int t = 1; t < T; ++t) {
    MergeSum(sum, blocks[t], &next);
    std::swap(sum, next);
  }
  const size_t gathered = sum.size();
  SplitTopK(sum, k, method, own, &dropped, scratch);
  w.Add(block, dropped, 1.0f / static_cast<float>(T));
  BsagUpdate(&st, gathered, k, T);
  return absl::OkStatus();
}

size_t BsagKeep(const BsagState& state, size_t k, int teams) {
  const double ratio = state.ratio > 0 ? state.ratio : 1.0 / teams;
  const double keep = std::round(ratio * static_cast<double>(k));
  return std::clamp<size_t>(static_cast<size_t>(std::max(keep, 1.0)), 1, std::max<size_t>(k, 1));
}

void BsagUpdate(BsagState* state, size_t gathered, size_t k, int teams) {
  Start(state, teams);
  const int direction = gathered > k ? -1 : +1;
  const double span = 1.0 - 1.0 / teams;
  if (state->direction != 0) state->step *= direction == state->direction ? 2.0 : 0.5;
  state->step = std::clamp(state->step, span / 64, std::max(span, span / 64));
  state->ratio = std::clamp(state->ratio + direction * state->step, 1.0 / teams, 1.0);
  state->direction = direction;
  state->last_gathered = gathered;
}

}  // namespace herd::sparse
