#pragma once
// Pure plan computation: which parameter-server shard holds which chunk of which tensor.
// Chunks are bounded in bytes so a large tensor spreads over shards; every chunk of every
// tensor is on exactly one shard. Deterministic in its arguments (docs/scheduler.md).

#include <cstdint>
#include <vector>

namespace herd::plan {

struct TensorLayout {
  int64_t elements = 0;  // product of the shape
  int64_t element_bytes = 4;
};

struct ShardChunk {
  int tensor = 0;      // index into the tensor list
  int chunk = 0;       // index within the tensor
  int64_t offset = 0;  // first element
  int64_t count = 0;   // elements
  int server = 0;      // shard id
};

// Splits each tensor (in list order) into chunks of at most max(chunk_bytes, element size)
// bytes and gives each chunk, in order, to the shard with the fewest bytes so far (the lowest
// id on a tie). A tensor of zero elements has no chunk. Returns nothing when servers < 1.
std::vector<ShardChunk> ShardMap(const std::vector<TensorLayout>& tensors, int64_t chunk_bytes,
                                 int servers);

}  // namespace herd::plan
