#include "algorithms/decentralized/full_precision.h"

#include "absl/strings/str_format.h"
#include "algorithms/collectives/internal.h"
#include "algorithms/decentralized/neighbour_exchange.h"
#include "common/reduce.h"
#include "common/status.h"

namespace herd::decentralized {

absl::Status DecentralizedFullPrecision(const DecentralizedFullPrecisionOptions& o) {
  constexpr std::string_view kWhat = "decentralized full-precision average";
  namespace ci = collectives::internal;
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(ci::ValidateBase(kWhat, o, o.data, o.count));
  HERD_RETURN_IF_ERROR(ci::RequireHostMemory(kWhat, *o.comm));
  HERD_RETURN_IF_ERROR(ci::ValidatePositive(kWhat, "segment_bytes", o.segment_bytes));
  if (!IsFloating(o.dtype)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: dtype must be floating (an average), got %s", kWhat, DTypeName(o.dtype)));
  }
  HERD_RETURN_IF_ERROR(internal::ValidatePeers(kWhat, o.peers, o.comm->rank(), o.comm->size()));
  if (o.count == 0 || o.peers.empty()) return absl::OkStatus();

  const size_t esize = DTypeSize(o.dtype);
  const size_t segments = ci::PiecesFor(o.count, esize, o.segment_bytes);
  auto* data = static_cast<std::byte*>(o.data);
  auto first = [&](size_t k) { return ci::SplitBegin(o.count, segments, k); };
  auto size = [&](size_t k) { return ci::SplitSize(o.count, segments, k); };
  const double weight = 1.0 / static_cast<double>(o.peers.size() + 1);

  internal::SegmentedExchange x;
  x.comm = o.comm;
  x.peers = o.peers;
  x.tag = o.tag;
  x.deadline = deadline;
  x.what = kWhat;
  x.segments = segments;
  x.max_recv_bytes = size(0) * esize;
  // Segment k is sent straight from `data`; finish(k) runs after those sends completed, so it
  // may average into the same memory.
  x.prepare = [&](size_t k) { return AsBytes(data + first(k) * esize, size(k) * esize); };
  x.recv_bytes = [&](size_t k) { return size(k) * esize; };
  x.finish = [&](size_t k, absl::Span<const ConstBytes> received) {
    std::byte* dst = data + first(k) * esize;
    for (const ConstBytes& peer : received)
      ReduceInto(o.dtype, ReduceOp::kSum, dst, peer.data(), size(k));
    ScaleInPlace(o.dtype, dst, size(k), weight);
    return absl::OkStatus();
  };
  return internal::RunSegmentedExchange(x);
}

}  // namespace herd::decentralized
