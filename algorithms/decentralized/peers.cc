#include "algorithms/decentralized/peers.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/splitmix.h"

namespace herd::decentralized {
namespace {

std::vector<int> RingPeers(int size, int rank) {
  const int left = (rank + size - 1) % size, right = (rank + 1) % size;
  std::vector<int> peers = {left};
  if (right != left) peers.push_back(right);  // size 2: left and right are the same rank
  std::sort(peers.begin(), peers.end());
  return peers;
}

std::vector<int> RandomPeers(int size, uint64_t seed, int64_t iteration, int rank) {
  // Fisher-Yates from the last position down, exactly as the scheduler draws it.
  std::vector<int> order(static_cast<size_t>(size));
  std::iota(order.begin(), order.end(), 0);
  SplitMix64 rng(IterationSeed(seed, iteration));
  for (size_t i = order.size() - 1; i > 0; --i) {
    std::swap(order[i], order[static_cast<size_t>(rng.Below(i + 1))]);
  }
  const size_t n = order.size();
  const size_t at =
      static_cast<size_t>(std::find(order.begin(), order.end(), rank) - order.begin());
  std::vector<int> peers;
  if (n % 2 == 1 && at >= n - 3) {  // the triple at the end
    for (size_t j = n - 3; j < n; ++j) {
      if (j != at) peers.push_back(order[j]);
    }
  } else {
    peers.push_back(order[at ^ 1]);  // positions 2i and 2i+1 pair up
  }
  std::sort(peers.begin(), peers.end());
  return peers;
}

}  // namespace

absl::StatusOr<Topology> ParseTopology(std::string_view name) {
  if (name == "ring") return Topology::kRing;
  if (name == "random") return Topology::kRandom;
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown topology '%s' (ring or random)", std::string(name)));
}

std::string_view TopologyName(Topology t) { return t == Topology::kRing ? "ring" : "random"; }

uint64_t IterationSeed(uint64_t seed, int64_t iteration) {
  SplitMix64 mix(seed);
  SplitMix64 again(mix.Next() ^ static_cast<uint64_t>(iteration));
  return again.Next();
}

std::vector<int> PeersForIteration(Topology topology, int size, uint64_t seed, int64_t iteration,
                                   int rank) {
  if (size < 2 || rank < 0 || rank >= size) return {};
  return topology == Topology::kRing ? RingPeers(size, rank)
                                     : RandomPeers(size, seed, iteration, rank);
}

}  // namespace herd::decentralized
