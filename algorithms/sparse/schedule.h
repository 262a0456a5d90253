#pragma once
// Who talks to whom in SparDL: the rounds of Spar-Reduce-Scatter, and the groups of ranks the
// phases run in (a team for SRS and the final all-gather, the ranks at one position of every
// team for Spar-All-Gather). Pure arithmetic, no communication; internal to algorithms/sparse.

#include <algorithm>
#include <cstddef>
#include <vector>

namespace herd::sparse {

// Round i of Spar-Reduce-Scatter over P members (R = ceil(log2 P) rounds):
//   round 0:      distance 2^(R-1), bag P - 2^(R-1) blocks
//   round i >= 1: distance 2^(R-1-i), bag 2^(R-1-i) blocks
// In a round, member m sends blocks (m + distance + j) mod P, j in [0, bag), to member
// m + distance and receives blocks (m + j) mod P from member m - distance.
//
// Why it works: before round i member m holds the contiguous range of blocks
// m .. m + H_i - 1 (H_0 = P, H_{i+1} = distance_i). The round sends the top of that range
// (m + distance_i .. m + H_i - 1, bag_i = H_i - distance_i blocks) and receives blocks
// m .. m + bag_i - 1, which lie in the part it keeps (bag_i <= distance_i). So a block is sent
// exactly once, only after everything destined for it has arrived, never receives after it was
// sent, and after the last round (distance 1) member m holds block m alone, reduced over all
// P members. P - 1 block transfers per member in all.
struct SrsRound {
  int distance = 0;
  int bag = 0;
  int first_transfer = 0;  // transfers of earlier rounds: numbers the tag steps of this one
};
std::vector<SrsRound> SrsSchedule(int members);

// ceil(log2 n) for n >= 1.
int CeilLog2(int n);
bool IsPowerOfTwo(int n);

// `size` ranks of the communicator, member m being rank base + m * stride; this rank is
// member `me`. Teams are contiguous (stride 1); the ranks at one position of every team are
// strided by the team size.
struct Group {
  int base = 0;
  int stride = 1;
  int size = 1;
  int me = 0;

  // The communicator rank of member m, m taken modulo size (negative too).
  int Rank(int m) const { return base + (((m % size) + size) % size) * stride; }
};

// `count` elements padded to blocks * block and cut into `blocks` contiguous blocks of `block`
// elements; the padding is virtual, so the last blocks may be short or empty.
struct BlockLayout {
  size_t count = 0;
  size_t block = 0;
  int blocks = 1;

  size_t begin(int b) const { return std::min(count, static_cast<size_t>(b) * block); }
  size_t length(int b) const {
    return std::min(count, (static_cast<size_t>(b) + 1) * block) - begin(b);
  }
};

}  // namespace herd::sparse
