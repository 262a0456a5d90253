#pragma once
// The per-call probes of herd's communication modes, run by `herd-emu probe-rank` like the
// probes of probe.h, on `bytes / 4` fp32 elements per rank:
//   ring:           collectives::RingAllReduce (the dense baseline);
//   sparse:         sparse::SparDLAllReduce, one team, `density`;
//   topk_allgather: sparse::TopkAllGatherAllReduce (TopA), `density`;
//   clps:           lowprec::CentralizedLowPrecisionAllReduce, minmax_uint8, average, both
//                   residuals and a workspace kept between calls;
//   decentralized:  decentralized::DecentralizedFullPrecision with the ring peers of
//                   PeersForIteration (left and right neighbour), the default exchange
//                   (halves: half the model to each neighbour);
//   decentralized_whole: the same with the whole model to each neighbour.
// As in training, each call starts from this rank's gradient (a fixed pseudo-random vector,
// different on every rank, copied in untimed) and the residuals carry over between calls.
// `warmup` untimed calls, then `iters` timed ones, each after a barrier; every rank takes the
// median of its own call times and the slowest rank's median is the result (seconds).

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/emulator/probe.h"
#include "transport/communicator.h"

namespace herd::emulator {

// True for the probe names above.
bool IsModeProbe(std::string_view name);

absl::StatusOr<ProbeResult> RunModeProbe(transport::Communicator& comm, const ProbeOptions& o);

// The median of `values` (the mean of the middle two for an even count); 0 when empty.
double MedianOf(std::vector<double> values);

}  // namespace herd::emulator
