#include "plan/topology.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/splitmix.h"

namespace herd::plan {

absl::StatusOr<Topology> ParseTopology(std::string_view name) {
  if (name == "ring") return Topology::kRing;
  if (name == "random") return Topology::kRandom;
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown topology '%s' (ring or random)", std::string(name)));
}

std::string_view TopologyName(Topology t) { return t == Topology::kRing ? "ring" : "random"; }

uint64_t IterationSeed(uint64_t job_seed, int64_t iteration) {
  SplitMix64 mix(job_seed);
  SplitMix64 again(mix.Next() ^ static_cast<uint64_t>(iteration));
  return again.Next();
}

std::vector<int> RingOrder(const std::vector<int>& ranks) {
  std::vector<int> ring = ranks;
  std::sort(ring.begin(), ring.end());
  return ring;
}

std::vector<std::vector<int>> RingPeers(const std::vector<int>& ranks, int world_size) {
  std::vector<std::vector<int>> peers(static_cast<size_t>(world_size));
  const std::vector<int> ring = RingOrder(ranks);
  const size_t n = ring.size();
  if (n < 2) return peers;
  for (size_t i = 0; i < n; ++i) {
    const int left = ring[(i + n - 1) % n];
    const int right = ring[(i + 1) % n];
    auto& mine = peers[static_cast<size_t>(ring[i])];
    mine.push_back(left);
    if (right != left) mine.push_back(right);  // two ranks: left and right are the same
    std::sort(mine.begin(), mine.end());
  }
  return peers;
}

std::vector<std::vector<int>> RandomPeers(const std::vector<int>& ranks, int world_size,
                                          uint64_t job_seed, int64_t iteration) {
  std::vector<std::vector<int>> peers(static_cast<size_t>(world_size));
  std::vector<int> order = RingOrder(ranks);  // canonical start: ascending
  const size_t n = order.size();
  if (n < 2) return peers;
  // Fisher-Yates, from the last position down: swap position i with a uniform j in [0, i].
  SplitMix64 rng(IterationSeed(job_seed, iteration));
  for (size_t i = n - 1; i > 0; --i) {
    const size_t j = static_cast<size_t>(rng.Below(i + 1));
    std::swap(order[i], order[j]);
  }
  auto link = [&](int a, int b) {
    peers[static_cast<size_t>(a)].push_back(b);
    peers[static_cast<size_t>(b)].push_back(a);
  };
  const size_t paired = (n % 2 == 0) ? n : n - 3;
  for (size_t i = 0; i < paired; i += 2) link(order[i], order[i + 1]);
  if (n % 2 == 1) {
    link(order[n - 3], order[n - 2]);
    link(order[n - 3], order[n - 1]);
    link(order[n - 2], order[n - 1]);
  }
  for (auto& p : peers) std::sort(p.begin(), p.end());
  return peers;
}

std::vector<std::vector<int>> Peers(Topology topology, const std::vector<int>& ranks,
                                    int world_size, uint64_t job_seed, int64_t iteration) {
  return topology == Topology::kRing ? RingPeers(ranks, world_size)
                                     : RandomPeers(ranks, world_size, job_seed, iteration);
}

std::vector<int> PeersForIteration(Topology topology, int size, uint64_t seed, int64_t iteration,
                                   int rank) {
  if (size < 2 || rank < 0 || rank >= size) return {};
  std::vector<int> everyone(static_cast<size_t>(size));
  std::iota(everyone.begin(), everyone.end(), 0);
  return std::move(Peers(topology, everyone, size, seed, iteration)[static_cast<size_t>(rank)]);
}

int EffectiveTeams(int participants, int requested) {
  if (participants <= 0) return 0;
  int t = std::clamp(requested, 1, participants);
  while (participants % t != 0) --t;
  return t;
}

std::vector<std::vector<int>> Teams(const std::vector<int>& ring, int teams) {
  std::vector<std::vector<int>> out;
  if (teams <= 0 || ring.empty()) return out;
  const size_t size = ring.size() / static_cast<size_t>(teams);
  for (int t = 0; t < teams; ++t) {
    out.emplace_back(ring.begin() + static_cast<std::ptrdiff_t>(t * size),
                     ring.begin() + static_cast<std::ptrdiff_t>((t + 1) * size));
  }
  return out;
}

}  // namespace herd::plan
