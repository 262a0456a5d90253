#pragma once
// The peers a rank of a UCX communicator connects to while the communicator is built: those
// the collectives talk to. Everyone else is connected on first use (ucx_bootstrap.cc).
//
//  - ring neighbours r +- 1 (ring and linear-pipeline collectives),
//  - r +- 2^k mod P for 2^k < P: the Bruck all-gather's partners, the binomial trees' parents
//    and children whatever their root (a tree rooted at q links v +- 2^k in ranks relative to
//    q, which are r +- 2^k mod P in real ranks), the fold partner r +- p2 of the recursive
//    algorithms when P is not a power of two, and the recursive-doubling and -halving
//    partners r XOR 2^k (below P, r XOR 2^k is r + 2^k or r - 2^k).
//
// The set is symmetric (q is in r's set exactly when r is in q's), so both ends of every pair
// connect, and each rank computes it from (rank, size) alone. It has about 2 log2(P) peers:
// 23 at P = 4,096, 24 at 4,095 and 4,097, 27 at 16,384.

#include <vector>

namespace herd::transport::ucx {

// The peers of `rank` in a `size`-rank communicator, ascending, without `rank` itself.
std::vector<int> BootstrapPeers(int rank, int size);

}  // namespace herd::transport::ucx
