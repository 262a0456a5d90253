#pragma once
// The peer rules of the decentralized modes live in plan/topology.h (herd::plan). This header
// only keeps the old include path and names working for the benchmark programs under bench/
// that still use them; new code includes plan/topology.h. Remove it once bench/ does.

#include "plan/topology.h"

namespace herd::decentralized {
using plan::PeersForIteration;
using plan::Topology;
}  // namespace herd::decentralized
