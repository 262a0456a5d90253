#include "algorithms/lowprec/centralized_low_precision.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "algorithms/collectives/allgather.h"
#include "algorithms/collectives/internal.h"
#include "algorithms/collectives/rails.h"
#include "algorithms/collectives/shm_engine.h"
#include "algorithms/collectives/topology.h"
#include "algorithms/compression/error_feedback.h"
#include "common/splitmix.h"
#include "common/status.h"
#include "transport/communicator.h"

namespace herd::lowprec {
namespace {

using collectives::ChunkBegin;
using collectives::ChunkSize;
using compression::Compressor;

constexpr std::string_view kWhat = "centralized low-precision all-reduce";

// One seed per (rank, chunk, phase) from the caller's, so no two compressions share a stream.
uint64_t SeedFor(uint64_t seed, int rank, int chunk, int phase) {
  return Mix64(seed ^ Mix64((uint64_t(uint32_t(rank)) << 32 | uint32_t(chunk)) * 4 + phase));
}

std::chrono::milliseconds Left(const Deadline& d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d.remaining());
}

absl::Status Validate(const CentralizedLowPrecisionOptions& o) {
  HERD_RETURN_IF_ERROR(collectives::internal::ValidateBase(kWhat, o, o.data, o.count));
  HERD_RETURN_IF_ERROR(collectives::internal::RequireHostMemory(kWhat, *o.comm));
  if (o.dtype != DType::kFloat32) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: dtype must be fp32 (the compressors encode fp32), got %s", kWhat, DTypeName(o.dtype)));
  }
  const size_t largest = ChunkSize(o.count, o.comm->size(), 0);
  if (o.compressor.kind() == Compressor::Kind::kTopK &&
      largest > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: chunks of %d values are too long for top-k's 32-bit indices", kWhat, largest));
  }
  return absl::OkStatus();
}

// Steps 1-5 over `comm` with chunk j = chunks[j] (owned by rank j of `comm`): the flat layout,
// or a rail's chunks in the hierarchical form. Seeds mix `seed_rank` (the parent's rank) and
// `chunk_ids[j]` (the flat chunk's number), so no two compressions of one call, on any rail,
// share a stream. The sum is divided by `divide_by` (1: not).
absl::Status ReduceChunks(transport::Communicator& comm, const CentralizedLowPrecisionOptions& o,
                          const std::vector<collectives::internal::Chunk>& chunks, int seed_rank,
                          const std::vector<int>& chunk_ids, int divide_by, Deadline deadline) {
  const int P = comm.size(), r = comm.rank();
  const Compressor c = o.compressor;
  auto chunk = [&](float* base, int j) {
    return std::span<float>(base + chunks[j].begin, chunks[j].count);
  };
  auto encoded_size = [&](int j) { return CompressedBytes(c, chunks[j].count); };
  size_t slot = 0;
  for (int j = 0; j < P; ++j) slot = std::max(slot, encoded_size(j));
  LowPrecisionWorkspace local;
  LowPrecisionWorkspace& w = o.workspace != nullptr ? *o.workspace : local;
  // The padding after a short encoding is never decoded: whatever it holds is harmless.
  w.sent.resize(P * slot);
  w.received.resize(P * slot);
  w.gathered.resize(P * slot);
  std::vector<std::byte>& sent = w.sent;
  std::vector<std::byte>& received = w.received;
  std::vector<std::byte>& gathered = w.gathered;
  std::string& bytes = w.bytes;
  std::vector<float>& scratch = w.scratch;

  // 1-2. Rank r gets every rank's chunk r: chunk (r + s) mod P is compressed (with the
  //      sender's error feedback) just before it is sent, s = 1..P-1, so each compression
  //      overlaps the sends before it; the own chunk is compressed last, into its received
  //      slot. Every receive is posted first (rendezvous transports find a buffer).
  using transport::OpKind;
  using transport::Request;
  using transport::Tag;
  auto compress = [&](int j, std::byte* dst) {
    const uint64_t seed = SeedFor(o.seed, seed_rank, chunk_ids[j], 0);
    if (o.delta != nullptr) {
      compression::CompressWithFeedback(c, chunk(o.data, j), chunk(o.delta, j), &bytes, &scratch,
                                        seed);
    } else {
      compression::Compress(c, chunk(o.data, j), &bytes, seed);
    }
    std::memcpy(dst, bytes.data(), bytes.size());
  };
  auto step_tag = [&](int s) { return Tag::Make(OpKind::kAllToAll, o.tag, uint32_t(s)); };
  std::vector<Request> recvs(P), sends(P);
  for (int s = 1; s < P; ++s) {
    const int from = (r - s + P) % P;
    recvs[from] = comm.irecv(from, step_tag(s),
                             AsMutableBytes(received.data() + from * slot, encoded_size(r)));
  }
  for (int s = 1; s < P; ++s) {
    const int to = (r + s) % P;
    compress(to, sent.data() + to * slot);
    sends[to] = comm.isend(to, step_tag(s), AsBytes(sent.data() + to * slot, encoded_size(to)));
  }
  compress(r, received.data() + r * slot);
  for (int j = 0; j < P; ++j) {
    if (j == r) continue;
    HERD_RETURN_IF_ERROR(
        collectives::internal::WaitRecv(comm, recvs[j], encoded_size(r), deadline, kWhat));
  }
  for (int j = 0; j < P; ++j) {
    if (j != r) HERD_RETURN_IF_ERROR(collectives::internal::WaitSend(comm, sends[j], deadline));
  }

  // 3. Sum the decoded contributions in rank order (every owner sums the same way), average,
  //    then compress with the reducer's error feedback.
  std::vector<float>& sum = w.sum;
  sum.resize(chunks[r].count);
  for (int j = 0; j < P; ++j) {
    std::string_view payload(reinterpret_cast<const char*>(received.data() + j * slot),
                             encoded_size(r));
    absl::Status st = j == 0 ? compression::Decompress(c, payload, sum)
                             : compression::DecompressAdd(c, payload, sum);
    if (!st.ok()) {
      return collectives::internal::Fail(
          comm, absl::InvalidArgumentError(
                    absl::StrFormat("%s: rank %d sent chunk %d that does not decode: %s", kWhat,
                                    chunk_ids[j], chunk_ids[r], std::string(st.message()))));
    }
  }
  if (divide_by > 1) ScaleInPlace(DType::kFloat32, sum.data(), sum.size(), 1.0 / divide_by);
  const uint64_t seed = SeedFor(o.seed, seed_rank, chunk_ids[r], 1);
  if (o.epsilon != nullptr) {
    compression::CompressWithFeedback(c, sum, chunk(o.epsilon, r), &bytes, &scratch, seed);
  } else {
    compression::Compress(c, sum, &bytes, seed);
  }
  std::memcpy(gathered.data() + r * slot, bytes.data(), bytes.size());

  // 4. Every rank gets every reduced chunk, still compressed.
  collectives::AllGatherOptions ag;
  ag.comm = &comm;
  ag.dtype = DType::kUInt8;
  ag.tag = o.tag;
  ag.timeout = Left(deadline);
  ag.data = gathered.data();
  ag.count = P * slot;
  HERD_RETURN_IF_ERROR(collectives::RingAllGather(ag));

  // 5. Decode all of them, the own chunk included: identical bytes, identical results.
  for (int j = 0; j < P; ++j) {
    std::string_view payload(reinterpret_cast<const char*>(gathered.data() + j * slot),
                             encoded_size(j));
    if (absl::Status st = compression::Decompress(c, payload, chunk(o.data, j)); !st.ok()) {
      return collectives::internal::Fail(
          comm, absl::InvalidArgumentError(
                    absl::StrFormat("%s: the reduced chunk %d of rank %d does not decode: %s",
                                    kWhat, chunk_ids[j], chunk_ids[j], std::string(st.message()))));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CentralizedLowPrecisionAllReduce(const CentralizedLowPrecisionOptions& o) {
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(Validate(o));
  if (o.count == 0) return absl::OkStatus();
  transport::Communicator& comm = *o.comm;
  const int P = comm.size();
  collectives::Topology* topo = nullptr;
  if (P > 1) {
    HERD_ASSIGN_OR_RETURN(topo, collectives::TopologyOf(comm, deadline));
  }
  const collectives::HostLayout* l = topo != nullptr ? &topo->layout() : nullptr;
  // Hosts of several ranks each (the same number), shared memory on all: the hierarchy.
  if (l == nullptr || l->hosts == 1 || l->flat() || l->per_host == 0 || !topo->shm_ok()) {
    std::vector<collectives::internal::Chunk> chunks(P);
    std::vector<int> ids(P);
    for (int j = 0; j < P; ++j) {
      chunks[j] = {ChunkBegin(o.count, P, j), ChunkSize(o.count, P, j)};
      ids[j] = j;
    }
    return ReduceChunks(comm, o, chunks, comm.rank(), ids, o.average ? P : 1, deadline);
  }
  // 0. The host's sums of this rail's chunks, in full precision through shared memory.
  namespace ci = collectives::internal;
  transport::shm::Domain* domain = topo->domain();
  const std::string what = absl::StrFormat("hier %s (id=%d)", kWhat, o.tag);
  const std::vector<ci::Region> regions = ci::RailRegions(*l, o.count, sizeof(float));
  auto data = reinterpret_cast<std::byte*>(o.data);
  ci::ShmPlan rs;
  rs.mode = ci::ShmMode::kReduceScatter;
  rs.data = data;
  rs.regions = regions;
  HERD_RETURN_IF_ERROR(ci::RunShmOperation(comm, *domain, transport::OpKind::kCompressed, o.tag, 0,
                                           rs, deadline, what));
  // 1-5 between hosts, along the rail, over its chunks (each rail rank reduces its own flat
  // chunk: epsilon stays where the flat layout keeps it).
  std::vector<int> ids;
  for (int h = 0; h < l->hosts; ++h) ids.push_back(l->rank_at(h, l->local));
  absl::Status st = ReduceChunks(*topo->rail(), o, ci::RailChunks(*l, o.count, l->local),
                                 comm.rank(), ids, o.average ? P : 1, deadline);
  if (!st.ok()) return ci::ShmFail(comm, domain, st);
  // 6. Every rail's decoded chunks to the whole host.
  ci::ShmPlan ag;
  ag.mode = ci::ShmMode::kAllGather;
  ag.data = data;
  ag.regions = regions;
  return ci::RunShmOperation(comm, *domain, transport::OpKind::kCompressed, o.tag, 1, ag, deadline,
                             what);
}

}  // namespace herd::lowprec
