// Recursive-doubling all-gather for any P, in place on `data`.
//
// Let p2 be the largest power of two <= P and rem = P - p2. Ranks below p2 are the core; core
// rank j < rem has the partner p2 + j ("extra" rank).
//   fold     every extra rank sends its chunk to its partner (1 message).
//   steps    for m = 1, 2, ..., p2/2: core rank v exchanges with v ^ m everything it holds. Before
//            the step v holds the chunks of the aligned group of m core ranks around it,
//            g = v & ~(m-1) .. g+m-1, plus the chunks of those ranks' partners, p2+g .. p2+g+m-1
//            (those below P). Both sets are contiguous ranges of `data`, because chunks are laid
//            out in rank order: at most 2 messages each way per step.
//   unfold   each partner hands its extra rank everything but the extra rank's own chunk: the
//            two ranges before and after it.
// Messages per rank: at most 2 log2(p2) + 2 each way. Extra memory: none.

#include <vector>

#include "algorithms/collectives/allgather.h"
#include "algorithms/collectives/internal.h"
#include "common/status.h"

namespace herd::collectives {
namespace {

using transport::Communicator;
using transport::OpKind;
using transport::Request;
using transport::Tag;

// A byte range of `data`.
struct Range {
  size_t offset = 0;
  size_t bytes = 0;
};

}  // namespace

absl::Status RecursiveDoublingAllGather(const AllGatherOptions& o) {
  constexpr std::string_view kWhat = "recursive-doubling all-gather";
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(internal::ValidateBase(kWhat, o, o.data, o.count));
  HERD_RETURN_IF_ERROR(internal::RequireHostMemory(kWhat, *o.comm));
  Communicator& comm = *o.comm;
  const int P = comm.size(), r = comm.rank();
  if (P == 1 || o.count == 0) return absl::OkStatus();

  auto* data = static_cast<std::byte*>(o.data);
  const size_t esize = DTypeSize(o.dtype);
  // Chunks [first, last) as one byte range.
  auto chunks = [&](int first, int last) {
    size_t b = ChunkBegin(o.count, P, first), e = ChunkBegin(o.count, P, last);
    return Range{b * esize, (e - b) * esize};
  };
  auto tag = [&](uint32_t step) { return Tag::Make(OpKind::kAllGather, o.tag, step); };

  int p2 = 1;
  while (p2 * 2 <= P) p2 *= 2;
  const int rem = P - p2;
  int log_p2 = 0;
  while ((1 << log_p2) < p2) ++log_p2;
  // Tag steps: 0 fold, 1 + 2i and 2 + 2i the two ranges of step i, 1 + 2 log2(p2) unfold.
  const uint32_t unfold_step = 1 + 2 * static_cast<uint32_t>(log_p2);

  // Sends `ranges` to `peer` and receives `incoming` from it, all under tags step, step+1, ...
  auto exchange = [&](int peer, uint32_t step, std::vector<Range> out,
                      std::vector<Range> in) -> absl::Status {
    std::vector<Request> recvs(in.size()), sends(out.size());
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i].bytes > 0) {
        recvs[i] = comm.irecv(peer, tag(step + uint32_t(i)),
                              AsMutableBytes(data + in[i].offset, in[i].bytes));
      }
    }
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i].bytes > 0) {
        sends[i] =
            comm.isend(peer, tag(step + uint32_t(i)), AsBytes(data + out[i].offset, out[i].bytes));
      }
    }
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i].bytes > 0) {
        HERD_RETURN_IF_ERROR(internal::WaitRecv(comm, recvs[i], in[i].bytes, deadline, kWhat));
      }
    }
    return comm.WaitAll(absl::MakeSpan(sends), deadline);
  };

  if (r >= p2) {  // an extra rank: fold into the partner, wait for the result
    const int partner = r - p2;
    HERD_RETURN_IF_ERROR(exchange(partner, 0, {chunks(r, r + 1)}, {}));
    return exchange(partner, unfold_step, {}, {chunks(0, r), chunks(r + 1, P)});
  }

  if (r < rem) HERD_RETURN_IF_ERROR(exchange(p2 + r, 0, {}, {chunks(p2 + r, p2 + r + 1)}));
  // What the aligned group of m core ranks starting at g holds: its chunks and its partners'.
  auto held = [&](int g, int m) {
    std::vector<Range> ranges{chunks(g, g + m)};
    if (g < rem) ranges.push_back(chunks(p2 + g, p2 + std::min(g + m, rem)));
    return ranges;
  };
  for (int m = 1, i = 0; m < p2; m <<= 1, ++i) {
    const int peer = r ^ m;
    HERD_RETURN_IF_ERROR(
        exchange(peer, 1 + 2 * uint32_t(i), held(r & ~(m - 1), m), held(peer & ~(m - 1), m)));
  }
  if (r < rem) {
    HERD_RETURN_IF_ERROR(
        exchange(p2 + r, unfold_step, {chunks(0, p2 + r), chunks(p2 + r + 1, P)}, {}));
  }
  return absl::OkStatus();
}

}  // namespace herd::collectives
