#pragma once
// Message tags. A tag packs (operation kind, bucket/tensor id, step) into 48 bits so that
// concurrent operations on one Communicator never match each other's messages. The top 16
// bits of the 64-bit wire tag are the backends' (the UCX backend puts the sender's rank there,
// because UCP tag matching cannot filter by endpoint).
//
// Messages between the same pair of ranks with the same tag are matched in the order they were
// sent, so a step counter that wraps (after 2^20 steps) stays correct.

#include <cstdint>
#include <string>

namespace herd::transport {

enum class OpKind : uint8_t {
  kUser = 0,  // point-to-point traffic of tests and tools
  kReduceScatter = 1,
  kAllGather = 2,
  kAllReduce = 3,
  kBroadcast = 4,
  kReduce = 5,
  kAllToAll = 6,
  kBarrier = 7,
  kSparse = 8,
  kDecentralized = 9,
  kCompressed = 10,
  kBootstrap = 11,
  kStateHandover = 12,  // an elastic job's live workers hand the state to one that joins
  kTopology = 13,       // collectives learning the host layout (algorithms/collectives/topology.h)
};

const char* OpKindName(OpKind kind);

struct Tag {
  static constexpr int kStepBits = 20;
  static constexpr int kIdBits = 20;
  static constexpr int kKindBits = 8;
  static constexpr int kBits = kStepBits + kIdBits + kKindBits;  // 48
  static constexpr uint32_t kMaxId = (1u << kIdBits) - 1;
  static constexpr uint32_t kStepMask = (1u << kStepBits) - 1;

  OpKind kind = OpKind::kUser;
  uint32_t id = 0;    // bucket or tensor id, < 2^20 (collectives validate it)
  uint32_t step = 0;  // algorithm step; wraps modulo 2^20

  static Tag Make(OpKind kind, uint32_t id, uint32_t step) {
    return Tag{kind, id & kMaxId, step & kStepMask};
  }
  Tag WithStep(uint32_t s) const { return Make(kind, id, s); }

  uint64_t packed() const {
    return (uint64_t{static_cast<uint8_t>(kind)} << (kIdBits + kStepBits)) |
           (uint64_t{id & kMaxId} << kStepBits) | uint64_t{step & kStepMask};
  }
  static Tag Unpack(uint64_t v) {
    return Tag{static_cast<OpKind>((v >> (kIdBits + kStepBits)) & 0xff),
               static_cast<uint32_t>((v >> kStepBits) & kMaxId),
               static_cast<uint32_t>(v & kStepMask)};
  }
  friend bool operator==(const Tag& a, const Tag& b) { return a.packed() == b.packed(); }

  std::string ToString() const;  // "allreduce id=3 step=5"
};

}  // namespace herd::transport
