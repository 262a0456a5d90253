#include "tools/emulator/cluster.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/logging.h"
#include "common/status.h"
#include "tools/emulator/rate.h"

namespace herd::emulator {
namespace {

constexpr int kMaxRanks = 4096;
constexpr char kBridge[] = "br0";

std::string HubDevice(int rank) { return absl::StrFormat("rank%d", rank); }

// tbf's arguments for `rate`. The bucket holds max(64 KiB, 1 ms of traffic): at least one
// 64 KiB GSO packet of the veth (tbf splits larger ones), and little enough that a short
// message cannot go much faster than the link would carry it. The queue holds 50 ms; a
// rank's own sends never fill it (TCP's small-queue limit pushes back on the socket), the
// hub side only when several ranks send to one at once.
std::vector<std::string> Tbf(uint64_t rate) {
  const uint64_t burst = std::max<uint64_t>(64 * 1024, rate / 8 / 1000);
  return {"root",    "tbf",
          "rate",    absl::StrFormat("%dbit", rate),
          "burst",   absl::StrFormat("%d", burst),
          "latency", "50ms"};
}

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

absl::Status Run(const std::vector<std::string>& argv) { return RunCommand(argv).status(); }

absl::Status NotRoot() {
  if (geteuid() == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "the cluster emulator needs root (network namespaces, veth, tc); running as uid %d",
      geteuid()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Cluster>> Cluster::Create(int ranks, uint64_t rate_bits_per_s,
                                                         int ranks_per_host, bool round_robin) {
  if (ranks < 1 || ranks > kMaxRanks) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cluster emulator: ranks must be in [1, %d], got %d", kMaxRanks, ranks));
  }
  if (ranks_per_host < 1 || ranks_per_host > ranks) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cluster emulator: ranks per host must be in [1, ranks = %d], got %d",
                        ranks, ranks_per_host));
  }
  if (rate_bits_per_s < kMinRate || rate_bits_per_s > kMaxRate) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cluster emulator: rate %d bit/s is outside [1mbit, 400gbit]", rate_bits_per_s));
  }
  HERD_RETURN_IF_ERROR(NotRoot());
  std::unique_ptr<Cluster> cluster(
      new Cluster(ranks, ranks_per_host, rate_bits_per_s,
                  absl::StrFormat("%s%d-", kNamespacePrefix, getpid())));
  cluster->round_robin_ = round_robin && ranks % ranks_per_host == 0;
  if (absl::Status st = cluster->Build(); !st.ok()) {
    if (absl::Status undo = cluster->Destroy(); !undo.ok()) {
      Log().warn("cluster emulator: cleanup after a failed build: {}", std::string(undo.message()));
    }
    return st;
  }
  return cluster;
}

absl::Status Cluster::Build() {
  const std::string hub = HubNamespace();
  HERD_RETURN_IF_ERROR(Run({"ip", "netns", "add", hub}));
  created_.push_back(hub);
  HERD_RETURN_IF_ERROR(Run({"ip", "-n", hub, "link", "set", "lo", "up"}));
  HERD_RETURN_IF_ERROR(Run({"ip", "-n", hub, "link", "add", kBridge, "type", "bridge"}));
  HERD_RETURN_IF_ERROR(Run({"ip", "-n", hub, "link", "set", kBridge, "up"}));
  for (int h = 0; h < hosts(); ++h) {
    const int r = round_robin_ ? h : h * per_host_;  // the host's first rank names its address
    const std::string ns = HostNamespace(h), port = HubDevice(h);
    HERD_RETURN_IF_ERROR(Run({"ip", "netns", "add", ns}));
    created_.push_back(ns);
    HERD_RETURN_IF_ERROR(Run({"ip", "-n", ns, "link", "set", "lo", "up"}));
    // Made in the hub, its peer end moved straight into the rank: no name ever appears in
    // the root namespace, so concurrent clusters (other pids) cannot collide.
    HERD_RETURN_IF_ERROR(Run({"ip", "-n", hub, "link", "add", port, "type", "veth", "peer", "name",
                              kRankDevice, "netns", ns}));
    HERD_RETURN_IF_ERROR(
        Run({"ip", "-n", ns, "addr", "add", Address(r) + "/16", "dev", kRankDevice}));
    HERD_RETURN_IF_ERROR(Run({"ip", "-n", ns, "link", "set", kRankDevice, "up"}));
    HERD_RETURN_IF_ERROR(Run({"ip", "-n", hub, "link", "set", port, "master", kBridge}));
    HERD_RETURN_IF_ERROR(Run({"ip", "-n", hub, "link", "set", port, "up"}));
    HERD_RETURN_IF_ERROR(
        Run(Concat({"tc", "-n", ns, "qdisc", "add", "dev", kRankDevice}, Tbf(rate_))));
    HERD_RETURN_IF_ERROR(Run(Concat({"tc", "-n", hub, "qdisc", "add", "dev", port}, Tbf(rate_))));
  }
  return absl::OkStatus();
}

absl::Status Cluster::Destroy() {
  // Deleting a namespace destroys the devices in it; a veth pair goes with either end.
  absl::Status first;
  for (auto it = created_.rbegin(); it != created_.rend(); ++it) {
    absl::Status st = Run({"ip", "netns", "del", *it});
    if (first.ok()) first = st;
  }
  created_.clear();
  return first;
}

Cluster::~Cluster() {
  if (absl::Status st = Destroy(); !st.ok()) {
    Log().warn("cluster emulator: teardown: {} (run `herd-emu cleanup`)",
               std::string(st.message()));
  }
}

std::string Cluster::HostNamespace(int host) const {
  return absl::StrFormat("%s%d", prefix_, host);
}
std::string Cluster::Namespace(int rank) const { return HostNamespace(HostOf(rank)); }
std::string Cluster::HubNamespace() const { return prefix_ + "hub"; }

std::string Cluster::Address(int rank) const {
  const int host = HostOf(rank) + 1;  // .0 is the network's own address
  return absl::StrFormat("10.77.%d.%d", host >> 8, host & 255);
}

std::vector<std::string> Cluster::RankEnvironment(int rank) const {
  if (per_host_ > 1) {
    // Shared memory among the host's ranks (UCX's and herd's own), TCP on emu0 between hosts.
    return {
        "UCX_TLS=sm,tcp,self",
        absl::StrFormat("UCX_NET_DEVICES=%s", kRankDevice),
        absl::StrFormat("HERD_UCX_HOST_ID=%s", Namespace(rank)),
        "UCX_WARN_UNUSED_ENV_VARS=n",
    };
  }
  return {
      "UCX_TLS=tcp,self",
      absl::StrFormat("UCX_NET_DEVICES=%s", kRankDevice),
      absl::StrFormat("HERD_UCX_HOST_ID=%s", Namespace(rank)),
      // The UCX backend tunes the shared-memory FIFO unless these are set; with shared
      // memory off UCX would warn that nothing uses the tuned values.
      "UCX_MM_SEG_SIZE=8192",
      "UCX_MM_FIFO_SIZE=64",
      "UCX_WARN_UNUSED_ENV_VARS=n",
  };
}

ChildSpec Cluster::Launch(int rank, ChildSpec child) const {
  child.argv.insert(child.argv.begin(), {"ip", "netns", "exec", Namespace(rank)});
  const std::vector<std::string> env = RankEnvironment(rank);
  child.env.insert(child.env.begin(), env.begin(), env.end());
  return child;
}

absl::Status Cluster::CheckAvailable() {
  HERD_RETURN_IF_ERROR(NotRoot());
  const std::string ns = absl::StrFormat("%s%d-probe", kNamespacePrefix, getpid());
  HERD_RETURN_IF_ERROR(Run({"ip", "netns", "add", ns}));
  absl::Status st = Run({"ip", "-n", ns, "link", "set", "lo", "up"});
  if (st.ok()) st = Run(Concat({"tc", "-n", ns, "qdisc", "add", "dev", "lo"}, Tbf(kMinRate)));
  absl::Status del = Run({"ip", "netns", "del", ns});
  return st.ok() ? del : st;
}

absl::Status Cluster::CleanupLeftovers(bool include_live, std::vector<std::string>* removed) {
  HERD_RETURN_IF_ERROR(NotRoot());
  HERD_ASSIGN_OR_RETURN(const std::string listing, RunCommand({"ip", "netns", "list"}));
  absl::Status first;
  for (absl::string_view line : absl::StrSplit(listing, '\n', absl::SkipWhitespace())) {
    // "herd-emu-123-0 (id: 4)": the name is the first word.
    const std::string name(line.substr(0, line.find(' ')));
    absl::string_view rest = name;
    if (!absl::ConsumePrefix(&rest, kNamespacePrefix)) continue;
    int pid = 0;
    const bool parsed = absl::SimpleAtoi(rest.substr(0, rest.find('-')), &pid) && pid > 0;
    const bool alive = parsed && (kill(pid, 0) == 0 || errno == EPERM);
    if (alive && !include_live) continue;
    absl::Status st = Run({"ip", "netns", "del", name});
    if (st.ok() && removed != nullptr) removed->push_back(name);
    if (first.ok()) first = st;
  }
  return first;
}

}  // namespace herd::emulator
