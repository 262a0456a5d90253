#include "algorithms/collectives/topology.h"

#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <unordered_map>

#include "absl/strings/str_format.h"
#include "algorithms/collectives/allgather.h"
#include "algorithms/collectives/internal.h"
#include "algorithms/collectives/sub_communicator.h"
#include "common/logging.h"
#include "common/status.h"
#include "transport/loopback/loopback_communicator.h"
#include "transport/shm/host_identity.h"

namespace herd::collectives {
namespace {

using transport::Communicator;

constexpr char kAttachmentKey[] = "herd.collectives.topology";
// Tag ids of the discovery's two all-gathers (kind kTopology, used by nothing else).
constexpr uint32_t kRecordsId = 0;
constexpr uint32_t kAgreementId = 1;

struct Record {
  uint64_t host;  // hash of the host identity
  int64_t pid;
  uint64_t nonce;
};
static_assert(sizeof(Record) == 3 * sizeof(int64_t));

// FNV-1a, then a mix: the same on every machine and process (std::hash and absl::Hash are not
// guaranteed to be). A collision between two hosts would only make their ranks try to share a
// segment and fail the identity check (shm then off everywhere), never mix their data.
uint64_t HashIdentity(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h == 0 ? 1 : h;
}

uint64_t RandomNonce() {
  uint64_t v = 0;
  if (::getrandom(&v, sizeof v, 0) == static_cast<ssize_t>(sizeof v)) return v;
  std::random_device rd;
  return (uint64_t{rd()} << 32) ^ rd();
}

absl::Status GatherOfKind(Communicator& comm, void* data, DType dtype, size_t count, uint32_t id,
                          Deadline deadline) {
  AllGatherOptions o;
  o.comm = &comm;
  o.dtype = dtype;
  o.data = data;
  o.count = count;
  o.tag = id;
  o.timeout = std::max(std::chrono::milliseconds(1),
                       std::chrono::duration_cast<std::chrono::milliseconds>(deadline.remaining()));
  return internal::BruckAllGatherOfKind(o, transport::OpKind::kTopology);
}

}  // namespace

HostLayout HostLayout::FromHosts(const std::vector<int>& host_of, int rank) {
  HostLayout l;
  l.ranks = static_cast<int>(host_of.size());
  l.host_of = host_of;
  l.hosts = host_of.empty() ? 0 : *std::max_element(host_of.begin(), host_of.end()) + 1;
  std::vector<int> sizes(l.hosts, 0);
  for (int h : host_of) ++sizes[h];
  l.host_begin.assign(l.hosts + 1, 0);
  for (int h = 0; h < l.hosts; ++h) l.host_begin[h + 1] = l.host_begin[h] + sizes[h];
  l.members.assign(l.ranks, 0);
  l.local_of.assign(l.ranks, 0);
  std::vector<int> fill(l.hosts, 0);
  for (int r = 0; r < l.ranks; ++r) {
    const int h = host_of[r];
    l.local_of[r] = fill[h];
    l.members[l.host_begin[h] + fill[h]++] = r;
  }
  l.host = host_of[rank];
  l.local = l.local_of[rank];
  const bool uniform =
      std::all_of(sizes.begin(), sizes.end(), [&](int s) { return s == sizes[0]; });
  l.per_host = uniform && l.hosts > 0 ? sizes[0] : 0;
  return l;
}

std::string HostLayout::Describe() const {
  if (per_host > 0) {
    return absl::StrFormat("%d ranks on %d host%s of %d", ranks, hosts, hosts == 1 ? "" : "s",
                           per_host);
  }
  int lo = ranks, hi = 0;
  for (int h = 0; h < hosts; ++h) {
    lo = std::min(lo, size_of(h));
    hi = std::max(hi, size_of(h));
  }
  return absl::StrFormat("%d ranks on %d hosts (%d-%d ranks each)", ranks, hosts, lo, hi);
}

Topology::~Topology() = default;

absl::StatusOr<std::unique_ptr<Topology>> Discover(Communicator& comm, Deadline deadline) {
  auto topo = std::make_unique<Topology>();
  const int P = comm.size(), r = comm.rank();
  const std::string identity = transport::shm::HostIdentityOf(comm);
  if (P == 1 || identity.empty()) {
    std::vector<int> own(P);
    for (int q = 0; q < P; ++q) own[q] = q;
    topo->layout_ = HostLayout::FromHosts(own, r);
    topo->shm_ok_ = true;  // no host of two ranks, none whose segment could fail
    return topo;
  }

  // 1. Everyone's record.
  std::vector<Record> records(P);
  records[r] = Record{HashIdentity(identity), static_cast<int64_t>(::getpid()), RandomNonce()};
  HERD_RETURN_IF_ERROR(
      GatherOfKind(comm, records.data(), DType::kInt64, size_t{3} * P, kRecordsId, deadline));
  std::vector<int> host_of(P);
  std::unordered_map<uint64_t, int> index;
  for (int q = 0; q < P; ++q) {
    host_of[q] = index.try_emplace(records[q].host, static_cast<int>(index.size())).first->second;
  }
  topo->layout_ = HostLayout::FromHosts(host_of, r);
  const HostLayout& l = topo->layout_;

  // 2. This host's segment.
  std::string error;
  if (l.size_of(l.host) > 1) {
    transport::shm::JoinOptions j;
    j.comm = &comm;
    j.index = l.local;
    j.identity = identity;
    for (int k = 0; k < l.size_of(l.host); ++k) {
      const int q = l.rank_at(l.host, k);
      j.members.push_back({q, records[q].pid});
    }
    j.nonce = records[j.members[0].rank].nonce;
    if (comm.backend() == "loopback") {
      std::vector<int> ranks;
      for (const auto& m : j.members) ranks.push_back(m.rank);
      j.peer_status = [&comm, ranks](int local) {
        return transport::LoopbackPeerStatus(comm, ranks[local]);
      };
    }
    auto config = transport::shm::DomainConfig::FromEnvironment();
    if (!config.ok()) {
      error = std::string(config.status().message());
    } else {
      j.config = *config;
      const Deadline join_by(std::min(deadline.at(), Clock::now() + std::chrono::seconds(30)));
      auto domain = transport::shm::Domain::Join(j, join_by);
      if (domain.ok()) {
        topo->domain_ = *std::move(domain);
      } else {
        error = domain.status().ToString();
      }
    }
  }

  // 3. Whether every host has its segment.
  std::vector<uint8_t> ok(P, 0);
  ok[r] = error.empty() ? 1 : 0;
  HERD_RETURN_IF_ERROR(GatherOfKind(comm, ok.data(), DType::kUInt8, P, kAgreementId, deadline));
  topo->shm_ok_ = std::all_of(ok.begin(), ok.end(), [](uint8_t v) { return v == 1; });
  if (!topo->shm_ok_) {
    const int first = static_cast<int>(std::find(ok.begin(), ok.end(), 0) - ok.begin());
    topo->shm_error_ = absl::StrFormat(
        "shared memory failed on the host of rank %d%s", first,
        error.empty() ? std::string() : absl::StrFormat(" (on this host: %s)", error));
    if (r == 0 || !error.empty())
      Log().warn("collectives: {}; the shm and hier algorithms are off", topo->shm_error_);
    topo->domain_.reset();
  }
  if (l.per_host > 0 && l.hosts > 1) {
    std::vector<int> rail;
    for (int h = 0; h < l.hosts; ++h) rail.push_back(l.rank_at(h, l.local));
    topo->rail_ = std::make_unique<internal::SubCommunicator>(comm, std::move(rail));
  }
  Log().debug("collectives rank {}: {}{}", r, l.Describe(),
              topo->domain() ? absl::StrFormat(", segment %s (%d bytes)", topo->domain()->name(),
                                               topo->domain()->segment_bytes())
                             : std::string());
  return topo;
}

absl::StatusOr<Topology*> TopologyOf(Communicator& comm, Deadline deadline) {
  HERD_ASSIGN_OR_RETURN(
      transport::CommunicatorAttachment * a,
      comm.Attachment(kAttachmentKey,
                      [&]() -> absl::StatusOr<std::unique_ptr<transport::CommunicatorAttachment>> {
                        HERD_ASSIGN_OR_RETURN(std::unique_ptr<Topology> t,
                                              Discover(comm, deadline));
                        return std::unique_ptr<transport::CommunicatorAttachment>(std::move(t));
                      }));
  return static_cast<Topology*>(a);
}

}  // namespace herd::collectives
