// The logarithmic reductions: recursive-halving reduce-scatter, recursive-doubling all-reduce,
// and recursive halving then doubling all-reduce (Rabenseifner), for any P.
//
// All three share the fold of recursive_doubling.cc: p2 is the largest power of two <= P,
// rem = P - p2, and core rank j < rem has the extra partner p2 + j. An extra rank first sends
// its whole vector to its partner, which reduces it into its own, and at the end receives its
// result from the partner; in between only the p2 core ranks talk, at distances that are
// powers of two, so every step has one peer.
//
//   halving  for m = p2/2, ..., 1: core v exchanges with v ^ m. Before the step v holds partial
//            sums for everything its aligned group of 2m core ranks owns; it sends what the
//            peer's group of m owns and reduces what its own group of m owns from the peer's
//            message. After m = 1 v holds its own part fully reduced.
//   doubling for m = 1, ..., p2/2: the all-gather of recursive_doubling.cc, or (whole-vector
//            all-reduce) v and v ^ m exchange their whole partial sums and both add them.
//
// What a group owns: for the reduce-scatter, the chunks of its core ranks and of their
// partners (chunk layout of options.h, two contiguous ranges); for the all-reduce, p2 equal
// blocks of the vector, block b owned by core rank b.
//
// Cost: ceil(log2 P) (+2 with a fold) rounds. The reduce-scatter and Rabenseifner's all-reduce
// move what the ring moves ((P-1)/P n each way, per half, for powers of two) in log2(p2)
// messages instead of P-1; the whole-vector all-reduce moves n per round, the fewest rounds
// for short, latency-bound vectors. Identical bits on every rank: a block is reduced only by
// its owner and copied from there, and in the whole-vector exchange both peers add the same two
// operands (IEEE addition is commutative).

#include <memory>
#include <vector>

#include "algorithms/collectives/allreduce.h"
#include "algorithms/collectives/internal.h"
#include "algorithms/collectives/reduce_scatter.h"
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

struct Fold {
  int p2 = 1;
  int rem = 0;
  int log_p2 = 0;
  explicit Fold(int P) {
    while (p2 * 2 <= P) p2 *= 2;
    rem = P - p2;
    while ((1 << log_p2) < p2) ++log_p2;
  }
};

// One call's context: the communicator, the buffer, the reduction, the tag kind and id.
class Exchanger {
 public:
  Exchanger(Communicator& comm, std::byte* data, DType dtype, ReduceOp op, OpKind kind, uint32_t id,
            Deadline deadline, std::string_view what)
      : comm_(comm),
        data_(data),
        dtype_(dtype),
        op_(op),
        kind_(kind),
        id_(id),
        deadline_(deadline),
        what_(what) {}

  // Sends `out` to `peer` and receives `in` from it, under tags step, step + 1, ...; with
  // `reduce`, the incoming ranges go through scratch and are reduced into `data`, otherwise they
  // land in place. `out` and `in` must not overlap unless `wait_sends_first` (the sends then
  // complete before anything is written).
  absl::Status Exchange(int peer, uint32_t step, const std::vector<Range>& out,
                        const std::vector<Range>& in, bool reduce, bool wait_sends_first = false) {
    const size_t esize = DTypeSize(dtype_);
    std::vector<Request> recvs(in.size()), sends(out.size());
    std::vector<std::byte*> dst(in.size());
    if (reduce) {
      size_t total = 0;
      for (const Range& range : in) total += range.bytes;
      if (total > scratch_bytes_) {
        scratch_ = std::make_unique_for_overwrite<std::byte[]>(total);
        scratch_bytes_ = total;
      }
    }
    size_t at = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      dst[i] = reduce ? scratch_.get() + at : data_ + in[i].offset;
      at += in[i].bytes;
      if (in[i].bytes > 0) {
        recvs[i] = comm_.irecv(peer, tag(step + uint32_t(i)), AsMutableBytes(dst[i], in[i].bytes));
      }
    }
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i].bytes > 0) {
        sends[i] = comm_.isend(peer, tag(step + uint32_t(i)),
                               AsBytes(data_ + out[i].offset, out[i].bytes));
      }
    }
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i].bytes > 0) {
        HERD_RETURN_IF_ERROR(internal::WaitRecv(comm_, recvs[i], in[i].bytes, deadline_, what_));
      }
    }
    if (wait_sends_first) HERD_RETURN_IF_ERROR(comm_.WaitAll(absl::MakeSpan(sends), deadline_));
    if (reduce) {
      for (size_t i = 0; i < in.size(); ++i) {
        if (in[i].bytes > 0) {
          ReduceInto(dtype_, op_, data_ + in[i].offset, dst[i], in[i].bytes / esize);
        }
      }
    }
    return comm_.WaitAll(absl::MakeSpan(sends), deadline_);
  }

 private:
  Tag tag(uint32_t step) const { return Tag::Make(kind_, id_, step); }

  Communicator& comm_;
  std::byte* data_;
  DType dtype_;
  ReduceOp op_;
  OpKind kind_;
  uint32_t id_;
  Deadline deadline_;
  std::string_view what_;
  std::unique_ptr<std::byte[]> scratch_;
  size_t scratch_bytes_ = 0;
};

absl::Status ValidateReduction(std::string_view what, const CommonOptions& o, const void* data,
                               size_t count, ReduceOp op) {
  HERD_RETURN_IF_ERROR(internal::ValidateBase(what, o, data, count));
  HERD_RETURN_IF_ERROR(internal::ValidateOp(what, o.dtype, op));
  return internal::RequireHostMemory(what, *o.comm);
}

}  // namespace

absl::Status RecursiveHalvingReduceScatter(const ReduceScatterOptions& o) {
  constexpr std::string_view kWhat = "recursive-halving reduce-scatter";
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(ValidateReduction(kWhat, o, o.data, o.count, o.op));
  Communicator& comm = *o.comm;
  const int P = comm.size(), r = comm.rank();
  if (P == 1 || o.count == 0) return absl::OkStatus();

  auto* data = static_cast<std::byte*>(o.data);
  const size_t esize = DTypeSize(o.dtype);
  const Fold f(P);
  auto chunks = [&](int first, int last) {
    size_t b = ChunkBegin(o.count, P, first), e = ChunkBegin(o.count, P, last);
    return Range{b * esize, (e - b) * esize};
  };
  // What the aligned group of m core ranks starting at g owns: its chunks and its partners'.
  auto owned = [&](int g, int m) {
    std::vector<Range> ranges{chunks(g, g + m)};
    if (g < f.rem) ranges.push_back(chunks(f.p2 + g, f.p2 + std::min(g + m, f.rem)));
    return ranges;
  };
  const Range whole{0, o.count * esize};
  // Tag steps: 0 fold, 1 + 2i and 2 + 2i the two ranges of halving step i, then the unfold.
  const uint32_t unfold_step = 1 + 2 * static_cast<uint32_t>(f.log_p2);
  Exchanger x(comm, data, o.dtype, o.op, OpKind::kReduceScatter, o.tag, deadline, kWhat);

  if (r >= f.p2) {  // an extra rank: its vector to the partner, its chunk back
    const int partner = r - f.p2;
    HERD_RETURN_IF_ERROR(x.Exchange(partner, 0, {whole}, {}, false));
    return x.Exchange(partner, unfold_step, {}, {chunks(r, r + 1)}, false);
  }
  if (r < f.rem) HERD_RETURN_IF_ERROR(x.Exchange(f.p2 + r, 0, {}, {whole}, true));
  for (int m = f.p2 / 2, i = 0; m >= 1; m >>= 1, ++i) {
    const int peer = r ^ m;
    HERD_RETURN_IF_ERROR(x.Exchange(peer, 1 + 2 * uint32_t(i), owned(peer & ~(m - 1), m),
                                    owned(r & ~(m - 1), m), true));
  }
  FinishReduction(o.dtype, o.op, data + chunks(r, r + 1).offset, ChunkSize(o.count, P, r), P);
  if (r < f.rem) {
    const int extra = f.p2 + r;
    const Range theirs = chunks(extra, extra + 1);
    FinishReduction(o.dtype, o.op, data + theirs.offset, ChunkSize(o.count, P, extra), P);
    HERD_RETURN_IF_ERROR(x.Exchange(extra, unfold_step, {theirs}, {}, false));
  }
  return absl::OkStatus();
}

absl::Status RecursiveDoublingAllReduce(const AllReduceOptions& o) {
  constexpr std::string_view kWhat = "recursive-doubling all-reduce";
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(ValidateReduction(kWhat, o, o.data, o.count, o.op));
  Communicator& comm = *o.comm;
  const int P = comm.size(), r = comm.rank();
  if (P == 1 || o.count == 0) return absl::OkStatus();

  auto* data = static_cast<std::byte*>(o.data);
  const Fold f(P);
  const Range whole{0, o.count * DTypeSize(o.dtype)};
  // Tag steps: 0 fold, 1 + i doubling step i, 1 + log2(p2) unfold.
  const uint32_t unfold_step = 1 + static_cast<uint32_t>(f.log_p2);
  Exchanger x(comm, data, o.dtype, o.op, OpKind::kAllReduce, o.tag, deadline, kWhat);

  if (r >= f.p2) {
    const int partner = r - f.p2;
    HERD_RETURN_IF_ERROR(x.Exchange(partner, 0, {whole}, {}, false));
    return x.Exchange(partner, unfold_step, {}, {whole}, false);
  }
  if (r < f.rem) HERD_RETURN_IF_ERROR(x.Exchange(f.p2 + r, 0, {}, {whole}, true));
  for (int m = 1, i = 0; m < f.p2; m <<= 1, ++i) {
    // Both ends send and reduce the whole vector: the send must be done before the sum lands.
    HERD_RETURN_IF_ERROR(x.Exchange(r ^ m, 1 + uint32_t(i), {whole}, {whole}, true,
                                    /*wait_sends_first=*/true));
  }
  FinishReduction(o.dtype, o.op, data, o.count, P);
  if (r < f.rem) HERD_RETURN_IF_ERROR(x.Exchange(f.p2 + r, unfold_step, {whole}, {}, false));
  return absl::OkStatus();
}

absl::Status RecursiveHalvingAllReduce(const AllReduceOptions& o) {
  constexpr std::string_view kWhat = "recursive-halving/doubling all-reduce";
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(ValidateReduction(kWhat, o, o.data, o.count, o.op));
  Communicator& comm = *o.comm;
  const int P = comm.size(), r = comm.rank();
  if (P == 1 || o.count == 0) return absl::OkStatus();

  auto* data = static_cast<std::byte*>(o.data);
  const size_t esize = DTypeSize(o.dtype);
  const Fold f(P);
  // Blocks [first, last) of the p2 equal blocks the core ranks own.
  auto blocks = [&](int first, int last) {
    size_t b = internal::SplitBegin(o.count, f.p2, first);
    size_t e = internal::SplitBegin(o.count, f.p2, last);
    return std::vector<Range>{Range{b * esize, (e - b) * esize}};
  };
  const Range whole{0, o.count * esize};
  // Tag steps: 0 fold, 1 + i halving step i, 1 + log2(p2) + i doubling step i, then the unfold.
  const uint32_t doubling_step = 1 + static_cast<uint32_t>(f.log_p2);
  const uint32_t unfold_step = 1 + 2 * static_cast<uint32_t>(f.log_p2);
  Exchanger x(comm, data, o.dtype, o.op, OpKind::kAllReduce, o.tag, deadline, kWhat);

  if (r >= f.p2) {
    const int partner = r - f.p2;
    HERD_RETURN_IF_ERROR(x.Exchange(partner, 0, {whole}, {}, false));
    return x.Exchange(partner, unfold_step, {}, {whole}, false);
  }
  if (r < f.rem) HERD_RETURN_IF_ERROR(x.Exchange(f.p2 + r, 0, {}, {whole}, true));
  for (int m = f.p2 / 2, i = 0; m >= 1; m >>= 1, ++i) {
    const int peer = r ^ m, g = r & ~(m - 1), pg = peer & ~(m - 1);
    HERD_RETURN_IF_ERROR(
        x.Exchange(peer, 1 + uint32_t(i), blocks(pg, pg + m), blocks(g, g + m), true));
  }
  const Range mine = blocks(r, r + 1).front();
  FinishReduction(o.dtype, o.op, data + mine.offset, mine.bytes / esize, P);
  for (int m = 1, i = 0; m < f.p2; m <<= 1, ++i) {
    const int peer = r ^ m, g = r & ~(m - 1), pg = peer & ~(m - 1);
    HERD_RETURN_IF_ERROR(
        x.Exchange(peer, doubling_step + uint32_t(i), blocks(g, g + m), blocks(pg, pg + m), false));
  }
  if (r < f.rem) HERD_RETURN_IF_ERROR(x.Exchange(f.p2 + r, unfold_step, {whole}, {}, false));
  return absl::OkStatus();
}

}  // namespace herd::collectives
