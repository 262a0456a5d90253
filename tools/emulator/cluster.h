#pragma once
// The cluster emulator: every emulated host in its own network namespace, joined through a
// bridge by a veth pair whose bandwidth is capped with tc's token-bucket filter in both
// directions — this machine's stand-in for a cluster in which the network, not the CPU, is the
// bottleneck. A host holds `ranks_per_host` ranks (G, default 1); rank r is on host r / G, or on
// host r mod H with round-robin placement (a rank's ring neighbours then sit on other hosts, as
// when a scheduler places ranks without regard to hosts).
//
//   host h: netns herd-emu-<pid>-<h>, lo up, veth "emu0" 10.77.x.y/16 (host part h + 1),
//           tbf at `rate` on emu0's egress (what the host sends)
//   hub:    netns herd-emu-<pid>-hub, bridge "br0", veth "rank<h>" per host enslaved to it,
//           tbf at `rate` on rank<h>'s egress (what host h receives)
//
// So each host has a full-duplex NIC of `rate` on a non-blocking switch, the model of the
// DeAR paper's cost analysis (B = the link bandwidth between any two workers). Latency is the
// kernel's (netem is missing here); bursts are limited to max(64 KiB, 1 ms at `rate`).
//
// Processes join a rank's host with `ip netns exec`, which also mounts the namespace's own /sys,
// so UCX lists only that host's devices. Between hosts they must talk over TCP on emu0: shared
// memory between hosts would bypass the cap, so RankEnvironment() sets UCX_NET_DEVICES=emu0 and
// HERD_UCX_HOST_ID to the host's namespace (the UCX backend then treats the ranks of other
// hosts as remote and never offers them shared memory), and with one rank per host
// UCX_TLS=tcp,self. The ranks of one host share its /dev/shm and memory: UCX_TLS=sm,tcp,self
// there, and herd's shared-memory collectives (transport/shm) run among them as on a real host.
//
// Requires root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and iproute2. One cluster per process at a
// time (the names carry the pid; a second Create fails with the `ip netns add` error). Everything
// created is removed by the destructor; a process that dies before it ran leaves namespaces behind,
// which CleanupLeftovers() (`herd-emu cleanup`) removes.
//
// The emulator knows nothing of herd's algorithms or benchmarks: it builds networks and runs
// commands in them (herd_emulator depends on common/ only). What runs in it is bench/'s
// (bench/emu/: herd-emu's probes and the DeAR replay).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/child_processes.h"

namespace herd::emulator {

inline constexpr char kNamespacePrefix[] = "herd-emu-";
inline constexpr char kRankDevice[] = "emu0";

class Cluster {
 public:
  // Builds the namespaces, veths, bridge and qdiscs; on any failure removes what it made and
  // returns the failing command and its message (FAILED_PRECONDITION when not root).
  // ranks in [1, 4096], ranks_per_host in [1, ranks]; rate as emulator::ParseRate allows.
  static absl::StatusOr<std::unique_ptr<Cluster>> Create(int ranks, uint64_t rate_bits_per_s,
                                                         int ranks_per_host = 1,
                                                         bool round_robin = false);

  // OK when this process may build clusters (root, `ip netns` works); otherwise the reason.
  // Creates and removes one namespace.
  static absl::Status CheckAvailable();

  // Removes namespaces named herd-emu-<pid>-* whose <pid> is no longer running (with
  // `include_live`, every herd-emu-* namespace). Reports what it removed in `removed`.
  static absl::Status CleanupLeftovers(bool include_live, std::vector<std::string>* removed);

  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  // Removes everything now (the destructor does it too, ignoring errors). Processes still
  // running in a namespace keep it alive until they exit; end them first.
  absl::Status Destroy();

  int ranks() const { return ranks_; }
  int ranks_per_host() const { return per_host_; }
  int hosts() const { return (ranks_ + per_host_ - 1) / per_host_; }
  int HostOf(int rank) const { return round_robin_ ? rank % hosts() : rank / per_host_; }
  uint64_t rate_bits_per_s() const { return rate_; }
  std::string Namespace(int rank) const;  // the namespace of the rank's host
  std::string HubNamespace() const;
  std::string Address(int rank) const;  // of the rank's host: "10.77.0.1"

  // The environment a rank's process needs (UCX over TCP on emu0, its host identity).
  std::vector<std::string> RankEnvironment(int rank) const;
  // `child` moved into rank's namespace: its argv behind `ip netns exec <ns>`, its environment
  // with RankEnvironment(rank) added.
  ChildSpec Launch(int rank, ChildSpec child) const;

 private:
  Cluster(int ranks, int per_host, uint64_t rate, std::string prefix)
      : ranks_(ranks), per_host_(per_host), rate_(rate), prefix_(std::move(prefix)) {}
  bool round_robin_ = false;
  absl::Status Build();
  std::string HostNamespace(int host) const;

  const int ranks_;
  const int per_host_;
  const uint64_t rate_;
  const std::string prefix_;          // "herd-emu-<pid>-"
  std::vector<std::string> created_;  // namespaces made so far, removed in reverse
};

}  // namespace herd::emulator
