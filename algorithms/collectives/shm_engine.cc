#include "algorithms/collectives/shm_engine.h"

#include <algorithm>
#include <cstring>

#include "algorithms/collectives/options.h"
#include "common/status.h"

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
  absl::Status st = RunShmPlan(*op, domain, plan, 0, deadline, what);
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

absl::Status RunShmPlan(LaneOp& op, const Domain& domain, const ShmPlan& plan, uint64_t base,
                        Deadline deadline, std::string_view what) {
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
      for (int d = 0; d < G; ++d) {
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
    if (mode == ShmMode::kAllReduce || mode == ShmMode::kReduce) {
      // In place in this member's stage: its own piece is the accumulator.
      const auto [a, b] = piece(me, t);
      if (a == b) return;
      for (int q = 0; q < G; ++q) srcs[q] = stage(q, t) + me * c;
      std::byte* dst = stage(me, t) + me * c;
      ReduceMany(plan.dtype, plan.op, dst, srcs.data(), G, (b - a) / es);
      finish(dst, b - a);
      return;
    }
    // Into the user buffer: this member's region (reduce-scatter) or the whole vector (direct,
    // every member alike, the sources in member order: the same bits everywhere).
    const bool direct = mode == ShmMode::kAllReduceDirect;
    const auto [a, b] = piece(direct ? 0 : me, t);
    const size_t at = direct ? 0 : me * c;
    region(direct ? 0 : me).ForEach(a, b, [&](size_t off, size_t run, size_t len) {
      for (int q = 0; q < G; ++q) srcs[q] = stage(q, t) + at + (run - a);
      ReduceMany(plan.dtype, plan.op, data + off, srcs.data(), G, len / es);
      finish(data + off, len);
    });
  };

  auto copy_out = [&](uint64_t t) {
    if (mode == ShmMode::kBroadcast) {
      const auto [a, b] = piece(0, t);
      const std::byte* from = stage(plan.root, t);
      region(0).ForEach(a, b, [&](size_t off, size_t run, size_t len) {
        std::memcpy(data + off, from + (run - a), len);
      });
      return;
    }
    for (int d = 0; d < G; ++d) {
      if (mode == ShmMode::kAllGather && d == me) continue;  // already in place
      const auto [a, b] = piece(d, t);
      const std::byte* from = stage(d, t) + (mode == ShmMode::kAllGather ? 0 : d * c);
      region(d).ForEach(a, b, [&](size_t off, size_t run, size_t len) {
        std::memcpy(data + off, from + (run - a), len);
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

  // Cursors: steps copied in, reduced, done. Every member advances (and publishes) all three
  // for every step, also where it has nothing to do in a phase, so that the counters mean the
  // same on every member.
  uint64_t ci = 0, rd = 0, co = 0;
  while (co < T) {
    if (co < rd && out_blocker(co) < 0) {
      if (copies_out) copy_out(co);
      op.Publish(C::kDone, base + ++co);
      continue;
    }
    if (rd < ci && reduce_blocker(rd) < 0) {
      if (reduces) reduce(rd);
      op.Publish(C::kReduced, base + ++rd);
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
  return absl::OkStatus();
}

}  // namespace herd::collectives::internal
