#include "transport/ucx/bootstrap_peers.h"

#include <algorithm>

namespace herd::transport::ucx {

std::vector<int> BootstrapPeers(int rank, int size) {
  std::vector<int> peers;
  if (size < 2 || rank < 0 || rank >= size) return peers;
  for (long d = 1; d < size; d *= 2) {
    const int step = static_cast<int>(d);
    peers.push_back((rank + step) % size);
    peers.push_back((rank - step + size) % size);
  }
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  peers.erase(std::remove(peers.begin(), peers.end(), rank), peers.end());
  return peers;
}

}  // namespace herd::transport::ucx
