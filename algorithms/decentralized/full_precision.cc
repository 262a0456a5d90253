#include "algorithms/decentralized/full_precision.h"

#include "absl/strings/str_format.h"
#include "algorithms/collectives/internal.h"
#include "algorithms/decentralized/neighbour_exchange.h"
#include "common/reduce.h"
#include "common/status.h"

namespace herd::decentralized {
namespace {

constexpr std::string_view kWhat = "decentralized full-precision average";
namespace ci = collectives::internal;

// Averages values [first, first + count) of `o.data` with the same values of every rank in
// `from`, sending them to every rank in `to` (as many as `from`).
absl::Status AverageRange(const DecentralizedFullPrecisionOptions& o, const Deadline& deadline,
                          size_t first, size_t count, std::vector<int> from, std::vector<int> to,
                          size_t first_segment_tag) {
  if (count == 0) return absl::OkStatus();
  const size_t esize = DTypeSize(o.dtype);
  const size_t segments = ci::PiecesFor(count, esize, o.segment_bytes);
  auto* data = static_cast<std::byte*>(o.data) + first * esize;
  auto begin = [&](size_t k) { return ci::SplitBegin(count, segments, k); };
  auto size = [&](size_t k) { return ci::SplitSize(count, segments, k); };
  const double weight = 1.0 / static_cast<double>(from.size() + 1);

  internal::SegmentedExchange x;
  x.comm = o.comm;
  x.peers = std::move(from);
  x.send_to = std::move(to);
  x.tag = o.tag;
  x.deadline = deadline;
  x.what = kWhat;
  x.segments = segments;
  x.first_segment_tag = first_segment_tag;
  x.max_recv_bytes = size(0) * esize;
  // Segment k is sent straight from `data`; finish(k) runs after those sends completed, so it
  // may average into the same memory.
  x.prepare = [&](size_t k) { return AsBytes(data + begin(k) * esize, size(k) * esize); };
  x.recv_bytes = [&](size_t k) { return size(k) * esize; };
  x.finish = [&](size_t k, absl::Span<const ConstBytes> received) {
    std::byte* dst = data + begin(k) * esize;
    for (const ConstBytes& peer : received)
      ReduceInto(o.dtype, ReduceOp::kSum, dst, peer.data(), size(k));
    ScaleInPlace(o.dtype, dst, size(k), weight);
    return absl::OkStatus();
  };
  return internal::RunSegmentedExchange(x);
}

}  // namespace

absl::Status DecentralizedFullPrecision(const DecentralizedFullPrecisionOptions& o) {
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
  if (o.exchange == Exchange::kWholeModel || o.peers.size() != 2) {
    return AverageRange(o, deadline, 0, o.count, o.peers, o.peers, 0);
  }

  const int P = o.comm->size(), r = o.comm->rank();
  auto ahead = [&](int p) { return (p - r + P) % P; };
  const int successor = ahead(o.peers[0]) < ahead(o.peers[1]) ? o.peers[0] : o.peers[1];
  const int predecessor = successor == o.peers[0] ? o.peers[1] : o.peers[0];
  const size_t half = (o.count + 1) / 2;
  // The second exchange's tags start after the first's; both cover at most half the model.
  const size_t second_tags = ci::PiecesFor(half, DTypeSize(o.dtype), o.segment_bytes);
  HERD_RETURN_IF_ERROR(AverageRange(o, deadline, 0, half, {predecessor}, {successor}, 0));
  return AverageRange(o, deadline, half, o.count - half, {successor}, {predecessor}, second_tags);
}

}  // namespace herd::decentralized
