#include "algorithms/sparse/schedule.h"

namespace herd::sparse {

int CeilLog2(int n) {
  int r = 0;
  while ((1LL << r) < n) ++r;
  return r;
}

bool IsPowerOfTwo(int n) { return n > 0 && (n & (n - 1)) == 0; }

std::vector<SrsRound> SrsSchedule(int members) {
  std::vector<SrsRound> rounds;
  const int R = CeilLog2(members);
  int transfers = 0;
  for (int i = 0; i < R; ++i) {
    const int distance = 1 << (R - 1 - i);
    // Round 0 takes whatever exceeds the largest power of two below P (at most that power,
    // since P <= 2^R); later rounds halve the held range.
    const int bag = i == 0 ? members - distance : distance;
    rounds.push_back(SrsRound{distance, bag, transfers});
    transfers += bag;
  }
  return rounds;
}

}  // namespace herd::sparse
