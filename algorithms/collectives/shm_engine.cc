#include "algorithms/collectives/shm_engine.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "absl/strings/numbers.h"
#include "algorithms/collectives/options.h"
#include "common/status.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace herd::collectives::internal {

using transport::shm::Domain;
using transport::shm::LaneOp;

void Region::Add(size_t offset, size_t length) {
  if (length == 0) return;
  if (!ranges.empty() && ranges.back().first + ranges.back().second == offset) {
    ranges.back().second += length;  // contiguous with the last range: one longer range
  } else {
    starts.push_back(bytes);
    ranges.emplace_back(offset, length);
  }
  bytes += length;
}

std::vector<Region> ChunkRegions(size_t count, int parts, size_t esize) {
  std::vector<Region> regions(parts);
  for (int d = 0; d < parts; ++d) {
    regions[d].Add(ChunkBegin(count, parts, d) * esize, ChunkSize(count, parts, d) * esize);
  }
  return regions;
}

Region WholeRegion(size_t count, size_t esize) {
  Region r;
  r.Add(0, count * esize);
  return r;
}

size_t ShmStreamBytes() {
  static const size_t bytes = [] {
    const char* v = std::getenv("HERD_SHM_STREAM_BYTES");
    size_t out = 0;
    if (v != nullptr && absl::SimpleAtoi(v, &out)) return out;
    return size_t{8} << 20;
  }();
  return bytes;
}

absl::Status ShmFail(transport::Communicator& comm, Domain* domain, absl::Status error) {
  if (domain != nullptr) domain->Abort(error);
  comm.abort(error).IgnoreError();
  return error;
}

absl::Status RunShmOperation(transport::Communicator& comm, Domain& domain, transport::OpKind kind,
                             uint32_t tag, int phase, const ShmPlan& plan, Deadline deadline,
                             std::string_view what) {
  const uint8_t k = static_cast<uint8_t>(static_cast<uint8_t>(kind) + 64 * phase);
  const uint64_t key = Domain::Key(k, tag, domain.NextInstance(k, tag));
  // What every member must agree on: the mode, the element type and op, the root, the regions.
  uint64_t signature = 0x9e3779b97f4a7c15ull;
  auto mix = [&](uint64_t v) { signature = (signature ^ v) * 0x100000001b3ull; };
  mix(static_cast<uint64_t>(plan.mode));
  mix(static_cast<uint64_t>(plan.dtype));
  mix(static_cast<uint64_t>(plan.op));
  mix(static_cast<uint64_t>(plan.root));
  mix(plan.regions.size());
  for (const Region& r : plan.regions) mix(r.bytes);
  absl::StatusOr<LaneOp> op = domain.Enter(key, signature, deadline, what);
  if (!op.ok()) return ShmFail(comm, &domain, op.status());
  absl::Status st = RunShmPlan(*op, domain, plan, deadline, what);
  if (!st.ok()) return ShmFail(comm, &domain, std::move(st));
  op->Leave();
  return absl::OkStatus();
}

namespace {

// The modes whose stage holds one piece per member (each member reduces its own piece).
bool Partitioned(ShmMode m) {
  return m == ShmMode::kReduceScatter || m == ShmMode::kAllReduce || m == ShmMode::kReduce;
}
// The modes with one region for everyone.
bool SingleRegion(ShmMode m) { return m == ShmMode::kAllReduceDirect || m == ShmMode::kBroadcast; }

// Bytes of one member's region that one step moves.
size_t PieceBytes(const ShmPlan& p, const Domain& d) {
  const size_t es = DTypeSize(p.dtype);
  const size_t c = Partitioned(p.mode) ? d.stage_bytes() / d.size() : d.stage_bytes();
  return std::max(es, c / es * es);
}

#if defined(__x86_64__)
bool HasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
__attribute__((target("avx2"))) void StreamCopyAvx2(std::byte* to, const std::byte* from,
                                                    size_t len) {
  // Up to the first 32-byte boundary of the destination with memcpy, then whole lines with
  // non-temporal stores, the tail with memcpy.
  const size_t head = std::min(len, (32 - reinterpret_cast<uintptr_t>(to) % 32) % 32);
  std::memcpy(to, from, head);
  size_t i = head;
  for (; i + 128 <= len; i += 128) {
    for (size_t k = 0; k < 128; k += 32) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + i + k));
      _mm256_stream_si256(reinterpret_cast<__m256i*>(to + i + k), v);
    }
  }
  std::memcpy(to + i, from + i, len - i);
}
#endif

void StreamCopy(std::byte* to, const std::byte* from, size_t len) {
#if defined(__x86_64__)
  if (len >= 4096 && HasAvx2()) return StreamCopyAvx2(to, from, len);
#endif
  std::memcpy(to, from, len);
}

void StreamFence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

size_t LongestRegion(const ShmPlan& p) {
  size_t longest = 0;
  for (const Region& r : p.regions) longest = std::max(longest, r.bytes);
  return longest;
}

}  // namespace

size_t ShmSteps(const ShmPlan& plan, const Domain& domain) {
  const size_t c = PieceBytes(plan, domain);
  return (LongestRegion(plan) + c - 1) / c;
}

absl::Status RunShmPlan(LaneOp& op, const Domain& domain, const ShmPlan& plan, Deadline deadline,
                        std::string_view what) {
  constexpr uint64_t base = 0;
  const int G = domain.size(), me = domain.index(), K = domain.stages();
  const ShmMode mode = plan.mode;
  const size_t es = DTypeSize(plan.dtype), c = PieceBytes(plan, domain);
  const uint64_t T = ShmSteps(plan, domain);
  const bool root = me == plan.root;
  const bool reduces = Partitioned(mode) || mode == ShmMode::kAllReduceDirect;
  const bool copies_in = mode != ShmMode::kBroadcast || root;
  const bool copies_out = mode == ShmMode::kAllReduce || mode == ShmMode::kAllGather ||
                          (mode == ShmMode::kBroadcast && !root) ||
                          (mode == ShmMode::kReduce && root);
  std::byte* const data = plan.data;
  std::vector<const void*> srcs(G);
  auto stage = [&](int q, uint64_t t) { return op.stage(q, static_cast<int>((base + t) % K)); };
  auto region = [&](int d) -> const Region& { return plan.regions[SingleRegion(mode) ? 0 : d]; };
  // Piece t of member d's region: run bytes [a, b).
  auto piece = [&](int d, uint64_t t) {
    const size_t a = t * c, b = std::min(a + c, region(d).bytes);
    return std::make_pair(a, std::max(a, b));
  };
  auto finish = [&](std::byte* p, size_t bytes) {
    if (plan.divide_by > 1) FinishReduction(plan.dtype, plan.op, p, bytes / es, plan.divide_by);
  };

  auto copy_in = [&](uint64_t t) {
    if (Partitioned(mode)) {
      // Its own piece nobody else reads: the reduction takes it from the buffer.
      for (int d = 0; d < G; ++d) {
        if (d == me) continue;
        const auto [a, b] = piece(d, t);
        std::byte* to = stage(me, t) + d * c;
        region(d).ForEach(a, b, [&](size_t off, size_t run, size_t len) {
          std::memcpy(to + (run - a), data + off, len);
        });
      }
      return;
    }
    const int owner = SingleRegion(mode) ? 0 : me;
    const auto [a, b] = piece(owner, t);
    std::byte* to = stage(me, t);
    region(owner).ForEach(a, b, [&](size_t off, size_t run, size_t len) {
      std::memcpy(to + (run - a), data + off, len);
    });
  };

  auto reduce = [&](uint64_t t) {
    if (Partitioned(mode)) {
      // This member's piece from every other member's stage and its own buffer: into its stage
      // (all-reduce, reduce: the others copy it from there) or in place in its buffer
      // (reduce-scatter: the buffer is the accumulator).
      const auto [a, b] = piece(me, t);
      const bool staged = mode != ShmMode::kReduceScatter;
      region(me).ForEach(a, b, [&](size_t off, size_t run, size_t len) {
        for (int q = 0; q < G; ++q) srcs[q] = stage(q, t) + me * c + (run - a);
        srcs[me] = data + off;
        std::byte* dst = staged ? stage(me, t) + me * c + (run - a) : data + off;
        ReduceMany(plan.dtype, plan.op, dst, srcs.data(), G, len / es);
        finish(dst, len);
      });
      return;
    }
    // Direct: every member reduces the whole piece into its buffer, the sources in member order
    // (the same bits everywhere).
    const auto [a, b] = piece(0, t);
    region(0).ForEach(a, b, [&](size_t off, size_t run, size_t len) {
      for (int q = 0; q < G; ++q) srcs[q] = stage(q, t) + (run - a);
      ReduceMany(plan.dtype, plan.op, data + off, srcs.data(), G, len / es);
      finish(data + off, len);
    });
  };

  // Long operations write their results with streaming stores: the buffer will not be in the
  // cache anyway, and the stores skip reading every line before writing it.
  const size_t stream_at = ShmStreamBytes();
  const bool stream =
      stream_at > 0 && LongestRegion(plan) * (SingleRegion(mode) ? 1 : G) >= stream_at;
  auto out = [&](std::byte* to, const std::byte* from, size_t len) {
    if (stream) {
      StreamCopy(to, from, len);
    } else {
      std::memcpy(to, from, len);
    }
  };
  auto copy_out = [&](uint64_t t) {
    if (mode == ShmMode::kBroadcast) {
      const auto [a, b] = piece(0, t);
      const std::byte* from = stage(plan.root, t);
      region(0).ForEach(a, b, [&](size_t off, size_t run, size_t len) {
        out(data + off, from + (run - a), len);
      });
      return;
    }
    for (int d = 0; d < G; ++d) {
      if (mode == ShmMode::kAllGather && d == me) continue;  // already in place
      const auto [a, b] = piece(d, t);
      const std::byte* from = stage(d, t) + (mode == ShmMode::kAllGather ? 0 : d * c);
      region(d).ForEach(a, b, [&](size_t off, size_t run, size_t len) {
        out(data + off, from + (run - a), len);
      });
    }
  };

  // What each task waits for (counters are absolute: base + step).
  using C = LaneOp::Counter;
  auto in_blocker = [&](uint64_t t) -> int {
    // Stage (base + t) % K is free once every member finished the step that used it last.
    if (!copies_in || base + t < static_cast<uint64_t>(K)) return -1;
    return op.Lagging(C::kDone, base + t - K + 1);
  };
  auto reduce_blocker = [&](uint64_t t) -> int {
    return reduces ? op.Lagging(C::kIn, base + t + 1) : -1;
  };
  auto out_blocker = [&](uint64_t t) -> int {
    if (!copies_out) return -1;
    if (mode == ShmMode::kBroadcast) {
      return op.Get(plan.root, C::kIn) >= base + t + 1 ? -1 : plan.root;
    }
    return op.Lagging(mode == ShmMode::kAllGather ? C::kIn : C::kReduced, base + t + 1);
  };

  // Only the all-reduce's and reduce's copy out reads the reduced counters.
  const bool reduced_read = mode == ShmMode::kAllReduce || mode == ShmMode::kReduce;
  // Cursors: steps copied in, reduced, done. Every member advances (and publishes) all three
  // for every step, also where it has nothing to do in a phase, so that the counters mean the
  // same on every member.
  uint64_t ci = 0, rd = 0, co = 0;
  while (co < T) {
    if (co < rd && out_blocker(co) < 0) {
      if (copies_out) copy_out(co);
      // After the last step no one waits for it: the next operation of the lane waits for
      // every member to leave instead (each publish may cost a wake-up syscall).
      if (++co < T) op.Publish(C::kDone, base + co);
      continue;
    }
    if (rd < ci && reduce_blocker(rd) < 0) {
      if (reduces) reduce(rd);
      ++rd;
      if (reduced_read) op.Publish(C::kReduced, base + rd);
      continue;
    }
    if (ci < T && ci < co + K && in_blocker(ci) < 0) {
      if (copies_in) copy_in(ci);
      op.Publish(C::kIn, base + ++ci);
      continue;
    }
    // Nothing is ready: sleep until one of the pending tasks is; name the oldest one's blocker.
    HERD_RETURN_IF_ERROR(op.Wait(
        [&]() -> int {
          int blocker = -1;
          if (co < rd) {
            if ((blocker = out_blocker(co)) < 0) return -1;
          }
          if (rd < ci) {
            const int b = reduce_blocker(rd);
            if (b < 0) return -1;
            if (blocker < 0) blocker = b;
          }
          if (ci < T && ci < co + K) {
            const int b = in_blocker(ci);
            if (b < 0) return -1;
            if (blocker < 0) blocker = b;
          }
          return blocker < 0 ? me : blocker;
        },
        deadline, what));
  }
  if (stream) StreamFence();
  return absl::OkStatus();
}

}  // namespace herd::collectives::internal
