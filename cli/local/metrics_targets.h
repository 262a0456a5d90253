#pragma once
// `herd local`'s metrics: every child serves Prometheus metrics on a loopback port picked
// here, and the list of them is written as a Prometheus file_sd target file
// (STATE/metrics-targets.json), so a Prometheus pointed at it scrapes the whole job
// (docs/metrics.md has the configuration).

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace herd::cli {

struct MetricsTarget {
  std::string process;  // "scheduler", "server-0", "worker-3"
  std::string role;     // "scheduler", "server", "worker"
  int port = 0;
};

// `count` distinct TCP ports of 127.0.0.1 that are free now, below the kernel's ephemeral range
// (so no outgoing connection takes one before the child binds it), bound together and closed
// again for the children to bind moments later (a port another program takes in between fails
// that child with a message naming the address).
absl::StatusOr<std::vector<int>> FreeLoopbackPorts(int count);

// Writes `targets` as a file_sd file (one target group per process, labelled with its role,
// process and herd job) to `path`, whole, under a temporary name then renamed.
absl::Status WriteMetricsTargets(const std::string& path, const std::string& job,
                                 const std::vector<MetricsTarget>& targets);

}  // namespace herd::cli
