#include "plan/shard_map.h"

#include <algorithm>

namespace herd::plan {

std::vector<ShardChunk> ShardMap(const std::vector<TensorLayout>& tensors, int64_t chunk_bytes,
                                 int servers) {
  std::vector<ShardChunk> out;
  if (servers < 1) return out;
  std::vector<int64_t> load(static_cast<size_t>(servers), 0);
  for (size_t t = 0; t < tensors.size(); ++t) {
    const int64_t esize = std::max<int64_t>(tensors[t].element_bytes, 1);
    const int64_t per_chunk = std::max<int64_t>(chunk_bytes / esize, 1);
    const int64_t n = tensors[t].elements;
    int chunk = 0;
    for (int64_t offset = 0; offset < n; offset += per_chunk, ++chunk) {
      const int64_t count = std::min(per_chunk, n - offset);
      const auto least = std::min_element(load.begin(), load.end());
      *least += count * esize;
      out.push_back(ShardChunk{static_cast<int>(t), chunk, offset, count,
                               static_cast<int>(least - load.begin())});
    }
  }
  return out;
}

}  // namespace herd::plan
