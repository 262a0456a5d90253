#pragma once
// Where a communicator's ranks run: which of them share a host, learned on the communicator
// itself the first time an algorithm needs it (as MPI_Comm_split_type does), and the
// shared-memory domain of this rank's host (transport/shm/shm_domain.h).
//
// Discovery (collective; every rank must reach it: the first `auto`, shm or hier call on the
// communicator does):
//   1. a Bruck all-gather (tag kind kTopology) of a 24-byte record per rank: a hash of its host
//      identity (transport/shm/host_identity.h), its pid, a random nonce;
//   2. the ranks of each host of two or more join their segment (the lowest rank creates it);
//   3. a second all-gather of one byte per rank: whether its host's segment works, so that every
//      rank knows whether the shm and hierarchical algorithms may run anywhere (they run on all
//      hosts or on none).
// Per rank at P ranks: ceil(log2 P) messages each way and 25 P bytes received, P ints kept (the
// host of each rank, and the ranks grouped by host); 4,096 ranks: 12 messages, 100 KiB, 32 KiB.
// Backends without host identities (a loopback fabric without labels, NCCL) skip the discovery:
// every rank is then a host of its own.
//
// The topology is kept on the communicator (Communicator::Attachment) and dies with it; the
// domain's destructor publishes "closed" to the host's other ranks.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/deadline.h"
#include "transport/communicator.h"
#include "transport/shm/shm_domain.h"

namespace herd::collectives {

struct HostLayout {
  int ranks = 1;
  int hosts = 1;
  std::vector<int> host_of;     // per rank: its host, hosts numbered by their lowest rank
  std::vector<int> local_of;    // per rank: its index among its host's ranks
  std::vector<int> host_begin;  // host h's ranks are members[host_begin[h], host_begin[h + 1])
  std::vector<int> members;     // the ranks grouped by host, ascending within a host
  int host = 0;                 // this rank's host
  int local = 0;                // this rank's index on it
  int per_host = 0;             // ranks per host when every host has as many, else 0

  int size_of(int h) const { return host_begin[h + 1] - host_begin[h]; }
  int rank_at(int h, int l) const { return members[host_begin[h] + l]; }
  // Every rank a host of its own (nothing to share).
  bool flat() const { return hosts == ranks; }

  // The layout of `host_of` as seen by `rank` (tests build layouts this way too).
  static HostLayout FromHosts(const std::vector<int>& host_of, int rank);
  std::string Describe() const;  // "8 ranks on 4 hosts of 2" / "... on 3 hosts (2-4 ranks)"
};

class Topology final : public transport::CommunicatorAttachment {
 public:
  ~Topology() override;
  const HostLayout& layout() const { return layout_; }
  // This rank's host's domain: nullptr when the rank is alone on its host or shm_ok() is false.
  transport::shm::Domain* domain() const { return shm_ok_ ? domain_.get() : nullptr; }
  // Every host of two or more ranks has a working segment: the shm and hier algorithms can run.
  bool shm_ok() const { return shm_ok_; }
  // Why not, when !shm_ok(): the first failing host's lowest rank, and this host's own error.
  const std::string& shm_error() const { return shm_error_; }
  // The ranks with this rank's local index, one per host in host order, as a communicator over
  // the parent (rank h = this index on host h); only for uniform layouts (per_host > 0).
  transport::Communicator* rail() const { return rail_.get(); }

 private:
  friend absl::StatusOr<std::unique_ptr<Topology>> Discover(transport::Communicator& comm,
                                                            Deadline deadline);
  HostLayout layout_;
  std::unique_ptr<transport::shm::Domain> domain_;
  bool shm_ok_ = false;
  std::string shm_error_;
  std::unique_ptr<transport::Communicator> rail_;
};

// The topology of `comm`, discovered on the first call and then kept. Errors: the discovery's
// (a peer that does not take part: DEADLINE_EXCEEDED naming it; the communicator is aborted then,
// as after any failed collective).
absl::StatusOr<Topology*> TopologyOf(transport::Communicator& comm, Deadline deadline);

}  // namespace herd::collectives
