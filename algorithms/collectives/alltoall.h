#pragma once
// All-to-all: `input` holds `count` elements split in P chunks (chunk layout of options.h);
// chunk j goes to rank j. `output` receives P blocks of ChunkSize(count, P, rank()) elements:
// block j is chunk rank() of rank j's input. Out of place (input and output must not overlap).

#include "algorithms/collectives/options.h"

namespace herd::collectives {

struct AllToAllOptions : CommonOptions {
  const void* input = nullptr;
  void* output = nullptr;
  size_t count = 0;
};

// Pairwise exchange: in step s, send to rank + s and receive from rank - s (P-1 steps, one
// message each way per step). Extra memory: none. Host memory only.
absl::Status PairwiseAllToAll(const AllToAllOptions& options);

}  // namespace herd::collectives
