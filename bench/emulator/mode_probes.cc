#include "bench/emulator/mode_probes.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>

#include "absl/strings/str_format.h"
#include "algorithms/collectives/allreduce.h"
#include "algorithms/decentralized/full_precision.h"
#include "algorithms/decentralized/peers.h"
#include "algorithms/lowprec/centralized_low_precision.h"
#include "algorithms/sparse/sparse_allreduce.h"
#include "bench/rank_sync.h"
#include "common/status.h"

namespace herd::emulator {
namespace {

using transport::Communicator;

// This rank's gradient: values in [-1, 1) from a splitmix64 stream seeded by the rank, so the
// ranks' top-k selections differ as they do in training.
std::vector<float> Gradient(size_t count, int rank) {
  std::vector<float> g(count);
  uint64_t x = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(rank + 1);
  for (float& v : g) {
    x += 0x9e3779b97f4a7c15ull;
    uint64_t z = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    v = static_cast<float>(static_cast<double>(z >> 40) / double(1ull << 23) - 1.0);
  }
  return g;
}

std::chrono::milliseconds Left(const Deadline& d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d.remaining());
}

// One call of the probe's collective on `data` (the gradient already copied in); `iteration`
// counts every call, warm-up included.
using CallFn = std::function<absl::Status(std::vector<float>& data, int64_t iteration)>;

CallFn MakeCall(Communicator& comm, const ProbeOptions& o, const Deadline& deadline, size_t count) {
  if (o.probe == "ring") {
    return [&comm, &deadline](std::vector<float>& data, int64_t) {
      collectives::AllReduceOptions a;
      a.comm = &comm;
      a.data = data.data();
      a.count = data.size();
      a.timeout = Left(deadline);
      return collectives::RingAllReduce(a);
    };
  }
  if (o.probe == "sparse" || o.probe == "topk_allgather") {
    auto residual = std::make_shared<std::vector<float>>(count, 0.0f);
    const bool spardl = o.probe == "sparse";
    return [&comm, &deadline, residual, spardl, density = o.density](std::vector<float>& data,
                                                                     int64_t) {
      sparse::SparseAllReduceOptions s;
      s.comm = &comm;
      s.data = data.data();
      s.residual = residual->data();
      s.count = data.size();
      s.density = density;
      s.teams = 1;
      s.timeout = Left(deadline);
      return spardl ? sparse::SparDLAllReduce(s) : sparse::TopkAllGatherAllReduce(s);
    };
  }
  if (o.probe == "clps") {
    struct State {
      std::vector<float> delta, epsilon;
      lowprec::LowPrecisionWorkspace workspace;
    };
    auto state = std::make_shared<State>();
    state->delta.assign(count, 0.0f);
    state->epsilon.assign(count, 0.0f);
    return [&comm, &deadline, state](std::vector<float>& data, int64_t iteration) {
      lowprec::CentralizedLowPrecisionOptions c;
      c.comm = &comm;
      c.data = data.data();
      c.count = data.size();
      c.compressor = compression::Compressor::kMinMaxUInt8;
      c.delta = state->delta.data();
      c.epsilon = state->epsilon.data();
      c.average = true;
      c.seed = static_cast<uint64_t>(iteration);
      c.workspace = &state->workspace;
      c.timeout = Left(deadline);
      return lowprec::CentralizedLowPrecisionAllReduce(c);
    };
  }
  // decentralized, decentralized_whole
  const auto exchange = o.probe == "decentralized" ? decentralized::Exchange::kHalves
                                                   : decentralized::Exchange::kWholeModel;
  return [&comm, &deadline, exchange](std::vector<float>& data, int64_t iteration) {
    decentralized::DecentralizedFullPrecisionOptions d;
    d.comm = &comm;
    d.data = data.data();
    d.count = data.size();
    d.peers = decentralized::PeersForIteration(decentralized::Topology::kRing, comm.size(), 0,
                                               iteration, comm.rank());
    d.exchange = exchange;
    d.timeout = Left(deadline);
    return decentralized::DecentralizedFullPrecision(d);
  };
}

}  // namespace

bool IsModeProbe(std::string_view name) {
  return name == "ring" || name == "sparse" || name == "topk_allgather" || name == "clps" ||
         name == "decentralized" || name == "decentralized_whole";
}

double MedianOf(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<ptrdiff_t>(mid), values.end());
  if (values.size() % 2 == 1) return values[mid];
  const double upper = values[mid];
  const double lower =
      *std::max_element(values.begin(), values.begin() + static_cast<ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

absl::StatusOr<ProbeResult> RunModeProbe(Communicator& comm, const ProbeOptions& o) {
  if (!IsModeProbe(o.probe)) {
    return absl::InvalidArgumentError(absl::StrFormat("'%s' is not a mode probe", o.probe));
  }
  if (o.density <= 0 || o.density > 1) {
    return absl::InvalidArgumentError(absl::StrFormat("density %g is not in (0, 1]", o.density));
  }
  const Deadline deadline = Deadline::After(o.timeout);
  const size_t count = o.bytes / sizeof(float);
  const std::vector<float> gradient = Gradient(count, comm.rank());
  std::vector<float> data(count);
  CallFn call = MakeCall(comm, o, deadline, count);
  int64_t iteration = 0;
  for (int i = 0; i < o.warmup; ++i, ++iteration) {
    std::copy(gradient.begin(), gradient.end(), data.begin());
    HERD_RETURN_IF_ERROR(call(data, iteration));
  }
  std::vector<double> times;
  for (int i = 0; i < o.iters; ++i, ++iteration) {
    std::copy(gradient.begin(), gradient.end(), data.begin());
    HERD_RETURN_IF_ERROR(bench::Barrier(comm, deadline));
    const auto start = Clock::now();
    HERD_RETURN_IF_ERROR(call(data, iteration));
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  double seconds = MedianOf(times);
  collectives::AllReduceOptions m;
  m.comm = &comm;
  m.dtype = DType::kFloat64;
  m.op = ReduceOp::kMax;
  m.data = &seconds;
  m.count = 1;
  m.tag = 1;
  m.timeout = Left(deadline);
  HERD_RETURN_IF_ERROR(collectives::RingAllReduce(m));
  ProbeResult result{o.probe, comm.size(), count * sizeof(float), o.iters, seconds, 0};
  result.bits_per_s = 8.0 * static_cast<double>(result.bytes) / seconds;
  result.density = o.probe == "sparse" || o.probe == "topk_allgather" ? o.density : 0;
  return result;
}

}  // namespace herd::emulator
