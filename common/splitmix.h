#pragma once
// splitmix64 (Steele, Lea, Flood 2014): the generator behind the seeded random choices that
// several processes must make identically (random peer pairings in plan/topology.h, stochastic
// rounding seeds).
// Tiny, fast, and defined bit for bit here, so every rank and every build draws the same
// numbers (std:: distributions are not specified bit for bit across library versions).

#include <cstdint>

namespace herd {

// The splitmix64 output function: a bijective 64-bit mix with good avalanche.
inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class SplitMix64 {
 public:
  static constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() { return Mix64(state_ += kGolden); }
  // Uniform in [0, bound), bound >= 1, by rejection so there is no modulo bias.
  uint64_t Below(uint64_t bound) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    while (true) {
      const uint64_t x = Next();
      if (x < limit) return x % bound;
    }
  }

 private:
  uint64_t state_;
};

}  // namespace herd
