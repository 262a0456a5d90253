#include "bench/percall/ops.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "absl/strings/str_format.h"
#include "algorithms/collectives/allreduce.h"
#include "algorithms/collectives/run.h"
#include "algorithms/decentralized/full_precision.h"
#include "algorithms/decentralized/low_precision.h"
#include "algorithms/lowprec/centralized_low_precision.h"
#include "common/status.h"
#include "plan/topology.h"

namespace herd::bench {
namespace {

std::vector<int> RingPeers(transport::Communicator& comm, int64_t iteration) {
  return plan::PeersForIteration(plan::Topology::kRing, comm.size(), 0, iteration, comm.rank());
}

// The options every collective takes, for this operation.
template <typename Options>
Options With(transport::Communicator& comm, const OpParams& p, float* data) {
  Options o;
  o.comm = &comm;
  o.timeout = p.timeout;
  o.tag = 1;
  o.data = data;
  o.count = p.count;
  return o;
}

}  // namespace

absl::StatusOr<OpCall> MakeOp(const std::string& name, transport::Communicator& comm,
                              const OpParams& p, float* data) {
  if (name == "ring") {
    auto o = With<collectives::AllReduceOptions>(comm, p, data);
    o.op = p.average ? ReduceOp::kAverage : ReduceOp::kSum;
    return [o](int64_t) { return collectives::RingAllReduce(o); };
  }
  // Any other all-reduce algorithm by its name (hier, shm, auto, rh, ...).
  if (auto algorithm = collectives::ParseAlgorithm(name); algorithm.ok()) {
    auto o = With<collectives::AllReduceOptions>(comm, p, data);
    o.op = p.average ? ReduceOp::kAverage : ReduceOp::kSum;
    const collectives::Algorithm a = *algorithm;
    return [o, a](int64_t) { return collectives::AllReduce(o, a); };
  }
  if (name == "spardl" || name == "topa") {
    struct State {
      std::vector<float> residual;
      sparse::BsagState bsag;
    };
    auto s = std::make_shared<State>();
    s->residual.assign(p.count, 0.0f);
    auto o = With<sparse::SparseAllReduceOptions>(comm, p, data);
    o.residual = s->residual.data();
    o.density = p.density;
    o.teams = name == "spardl" ? p.teams : 1;
    o.sag = p.sag;
    o.topk = p.topk;
    o.bsag = &s->bsag;
    const bool spardl = name == "spardl";
    return [o, s, spardl](int64_t) {
      return spardl ? sparse::SparDLAllReduce(o) : sparse::TopkAllGatherAllReduce(o);
    };
  }
  if (name == "clps") {
    struct State {
      std::vector<float> delta, epsilon;
      lowprec::LowPrecisionWorkspace workspace;
    };
    auto s = std::make_shared<State>();
    s->delta.assign(p.count, 0.0f);
    s->epsilon.assign(p.count, 0.0f);
    auto o = With<lowprec::CentralizedLowPrecisionOptions>(comm, p, data);
    o.compressor = p.compressor;
    o.delta = s->delta.data();
    o.epsilon = s->epsilon.data();
    o.average = true;
    o.workspace = &s->workspace;
    return [o, s](int64_t it) mutable {
      o.seed = static_cast<uint64_t>(it);
      return lowprec::CentralizedLowPrecisionAllReduce(o);
    };
  }
  if (name == "decentralized" || name == "decentralized_whole") {
    auto o = With<decentralized::DecentralizedFullPrecisionOptions>(comm, p, data);
    o.segment_bytes = p.segment_bytes;
    o.exchange = name == "decentralized" ? decentralized::Exchange::kHalves
                                         : decentralized::Exchange::kWholeModel;
    return [o, &comm](int64_t it) mutable {
      o.peers = RingPeers(comm, it);
      return decentralized::DecentralizedFullPrecision(o);
    };
  }
  if (name == "decentralized_lp") {
    struct State {
      std::vector<float> self;
      std::vector<std::vector<float>> replicas;
    };
    auto s = std::make_shared<State>();
    auto o = With<decentralized::DecentralizedLowPrecisionOptions>(comm, p, data);
    o.peers = RingPeers(comm, 0);  // a replica follows one peer: the same ones every call
    o.compressor = p.compressor;
    o.segment_values = std::max<size_t>(1, p.segment_bytes / sizeof(float));
    s->self.resize(p.count);
    s->replicas.assign(o.peers.size(), std::vector<float>(p.count));
    o.self_replica = s->self.data();
    for (auto& replica : s->replicas) o.peer_replicas.push_back(replica.data());
    HERD_RETURN_IF_ERROR(decentralized::InitDecentralizedReplicas(o));
    return [o, s](int64_t it) mutable {
      o.seed = static_cast<uint64_t>(it);
      return decentralized::DecentralizedLowPrecision(o);
    };
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "unknown operation '%s' (ring, spardl, topa, clps, decentralized, decentralized_whole, "
      "decentralized_lp)",
      name));
}

std::vector<float> Gradient(size_t count, int rank) {
  std::vector<float> g(count);
  uint64_t x = 0x5eedull ^ (uint64_t(rank) << 32);
  auto next = [&x] {  // xorshift64
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  for (float& v : g) {
    const uint64_t h = next();
    // Sum of four uniforms: close enough to a normal for a benchmark, and cheap.
    const double n = (double(h & 0xffff) + double((h >> 16) & 0xffff) + double((h >> 32) & 0xffff) +
                      double(h >> 48)) /
                         65536.0 -
                     2.0;
    const double scale = std::exp(double(next() & 0xff) / 64.0 - 2.0);
    v = static_cast<float>(n * scale);
  }
  return g;
}

}  // namespace herd::bench
