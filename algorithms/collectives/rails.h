#pragma once
// The flat chunk layout seen along the rails of a uniform host layout (topology.h): rail l is
// the ranks with local index l, one per host. Shared by the hierarchical collectives and the
// hierarchical C_LP_S (algorithms/lowprec). Internal to herd_algorithms.

#include <cstddef>
#include <vector>

#include "algorithms/collectives/internal.h"
#include "algorithms/collectives/options.h"
#include "algorithms/collectives/shm_engine.h"
#include "algorithms/collectives/topology.h"

namespace herd::collectives::internal {

// Rail `local`'s chunks of the flat layout of `count` elements over all ranks: the chunk of
// rank(h, local) for every host h, in host order (rail rank h owns chunk h).
inline std::vector<Chunk> RailChunks(const HostLayout& l, size_t count, int local) {
  std::vector<Chunk> chunks(l.hosts);
  for (int h = 0; h < l.hosts; ++h) {
    const int q = l.rank_at(h, local);
    chunks[h] = {ChunkBegin(count, l.ranks, q), ChunkSize(count, l.ranks, q)};
  }
  return chunks;
}

// Per local index, that rail's chunks as one region of the host's shm phases, in bytes.
inline std::vector<Region> RailRegions(const HostLayout& l, size_t count, size_t esize) {
  std::vector<Region> regions(l.per_host);
  for (int local = 0; local < l.per_host; ++local) {
    for (const Chunk& c : RailChunks(l, count, local)) {
      regions[local].Add(c.begin * esize, c.count * esize);
    }
  }
  return regions;
}

}  // namespace herd::collectives::internal
