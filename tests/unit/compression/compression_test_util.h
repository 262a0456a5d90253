#pragma once
// Inputs and payload helpers shared by the compressor tests.

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "algorithms/compression/compressor.h"

namespace herd::compression::testing {

inline std::vector<float> Gaussian(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

inline Compressor Parsed(std::string_view name) { return ParseCompressor(name).value(); }

inline std::string Encoded(Compressor c, const std::vector<float>& in, uint64_t seed = 0) {
  std::string bytes;
  Compress(c, in, &bytes, seed);
  return bytes;
}

template <typename T>
void Poke(std::string& bytes, size_t offset, T value) {
  std::memcpy(bytes.data() + offset, &value, sizeof value);
}

}  // namespace herd::compression::testing
