#include "algorithms/decentralized/low_precision.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <span>
#include <string>

#include "absl/strings/str_format.h"
#include "algorithms/collectives/internal.h"
#include "algorithms/decentralized/neighbour_exchange.h"
#include "common/splitmix.h"
#include "common/status.h"

namespace herd::decentralized {
namespace {

namespace ci = collectives::internal;
using compression::Compressor;

constexpr std::string_view kStep = "decentralized low-precision step";
constexpr std::string_view kInit = "decentralized replica initialisation";

absl::Status Validate(std::string_view what, const DecentralizedLowPrecisionOptions& o) {
  HERD_RETURN_IF_ERROR(ci::ValidateBase(what, o, o.data, o.count));
  HERD_RETURN_IF_ERROR(ci::RequireHostMemory(what, *o.comm));
  HERD_RETURN_IF_ERROR(ci::ValidatePositive(what, "segment_values", o.segment_values));
  if (o.dtype != DType::kFloat32) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: dtype must be fp32 (the compressors encode fp32), got %s", what, DTypeName(o.dtype)));
  }
  HERD_RETURN_IF_ERROR(internal::ValidatePeers(what, o.peers, o.comm->rank(), o.comm->size()));
  if (o.peer_replicas.size() != o.peers.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %d peer replicas for %d peers (one replica per peer)", what,
                        o.peer_replicas.size(), o.peers.size()));
  }
  if (o.count > 0) {
    if (o.self_replica == nullptr) {
      return absl::InvalidArgumentError(absl::StrFormat("%s: self_replica is null", what));
    }
    for (size_t i = 0; i < o.peers.size(); ++i) {
      if (o.peer_replicas[i] == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: the replica of peer %d is null", what, o.peers[i]));
      }
    }
  }
  if (o.compressor.kind() == Compressor::Kind::kTopK &&
      std::min(o.segment_values, o.count) > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: segments too long for top-k's 32-bit indices", what));
  }
  return absl::OkStatus();
}

// Segment k of the count values: [first(k), first(k) + size(k)).
struct Segments {
  Segments(size_t count, size_t per_segment)
      : count(count), n((count + per_segment - 1) / per_segment), per(per_segment) {}
  size_t first(size_t k) const { return k * per; }
  size_t size(size_t k) const { return std::min(per, count - k * per); }
  size_t count, n, per;
};

internal::SegmentedExchange BaseExchange(std::string_view what,
                                         const DecentralizedLowPrecisionOptions& o,
                                         Deadline deadline, size_t segments) {
  internal::SegmentedExchange x;
  x.comm = o.comm;
  x.peers = o.peers;
  x.tag = o.tag;
  x.deadline = deadline;
  x.what = what;
  x.segments = segments;
  return x;
}

}  // namespace

absl::Status DecentralizedLowPrecision(const DecentralizedLowPrecisionOptions& o) {
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(Validate(kStep, o));
  if (o.count == 0) return absl::OkStatus();
  if (o.peers.empty()) {  // nobody to average with: keep the local step, exactly
    std::copy(o.data, o.data + o.count, o.self_replica);  // (may be the same buffer)
    return absl::OkStatus();
  }
  const Compressor c = o.compressor;
  const Segments seg(o.count, o.segment_values);
  const size_t d = o.peers.size();
  const float weight = static_cast<float>(1.0 / static_cast<double>(d + 1));
  const uint64_t rank_key = Mix64(uint64_t(uint32_t(o.comm->rank())) + 1);
  std::array<std::string, internal::kWindow> sent;  // segment k's encoding lives in k % kWindow
  std::vector<float> z(std::min(seg.per, o.count));

  internal::SegmentedExchange x = BaseExchange(kStep, o, deadline, seg.n);
  x.max_recv_bytes = CompressedBytes(c, seg.size(0));
  x.recv_bytes = [&](size_t k) { return CompressedBytes(c, seg.size(k)); };
  x.prepare = [&](size_t k) {
    const size_t b = seg.first(k), n = seg.size(k);
    const float* self = o.self_replica + b;
    const float* y = o.data + b;
    for (size_t e = 0; e < n; ++e) z[e] = self[e];
    for (size_t i = 0; i < d; ++i) {
      const float* peer = o.peer_replicas[i] + b;
      for (size_t e = 0; e < n; ++e) z[e] += peer[e];
    }
    // Both differences are small near consensus: take them before adding.
    for (size_t e = 0; e < n; ++e) z[e] = (z[e] * weight - self[e]) + (y[e] - self[e]);
    std::string& out = sent[k % internal::kWindow];
    compression::Compress(c, std::span<const float>(z.data(), n), &out,
                          Mix64(o.seed ^ rank_key ^ Mix64(k)));
    return AsBytes(out.data(), out.size());
  };
  x.finish = [&](size_t k, absl::Span<const ConstBytes> received) {
    const size_t b = seg.first(k), n = seg.size(k);
    for (size_t i = 0; i < d; ++i) {
      std::string_view payload(reinterpret_cast<const char*>(received[i].data()),
                               received[i].size());
      absl::Status st =
          compression::DecompressAdd(c, payload, std::span<float>(o.peer_replicas[i] + b, n));
      if (!st.ok()) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: rank %d sent segment %d that does not decode: %s", kStep,
                            o.peers[i], k, std::string(st.message())));
      }
    }
    // The own update from the very bytes the peers decode, so the replicas stay bitwise equal.
    const std::string& mine = sent[k % internal::kWindow];
    HERD_RETURN_IF_ERROR(
        compression::DecompressAdd(c, mine, std::span<float>(o.self_replica + b, n)));
    if (o.data != o.self_replica) std::copy(o.self_replica + b, o.self_replica + b + n, o.data + b);
    return absl::OkStatus();
  };
  return internal::RunSegmentedExchange(x);
}

absl::Status InitDecentralizedReplicas(const DecentralizedLowPrecisionOptions& o) {
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(Validate(kInit, o));
  if (o.count == 0) return absl::OkStatus();
  if (o.data != o.self_replica) std::copy(o.data, o.data + o.count, o.self_replica);
  const Segments seg(o.count, o.segment_values);
  internal::SegmentedExchange x = BaseExchange(kInit, o, deadline, seg.n);
  x.max_recv_bytes = seg.size(0) * sizeof(float);
  x.recv_bytes = [&](size_t k) { return seg.size(k) * sizeof(float); };
  x.prepare = [&](size_t k) { return AsBytes(o.data + seg.first(k), seg.size(k) * sizeof(float)); };
  x.finish = [&](size_t k, absl::Span<const ConstBytes> received) {
    for (size_t i = 0; i < o.peers.size(); ++i) {
      std::memcpy(o.peer_replicas[i] + seg.first(k), received[i].data(), received[i].size());
    }
    return absl::OkStatus();
  };
  return internal::RunSegmentedExchange(x);
}

}  // namespace herd::decentralized
