#include "bench/lowprec/lowprec_rank.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>

#include "absl/strings/str_format.h"
#include "algorithms/collectives/allreduce.h"
#include "algorithms/decentralized/full_precision.h"
#include "algorithms/decentralized/low_precision.h"
#include "algorithms/decentralized/peers.h"
#include "algorithms/lowprec/centralized_low_precision.h"
#include "bench/rank_sync.h"
#include "common/status.h"
#include "transport/store/store.h"
#include "transport/ucx/ucx_communicator.h"

namespace herd::bench::lowprec {
namespace {

using decentralized::PeersForIteration;
using decentralized::Topology;

// What one operation needs between calls: its buffers and the call itself.
struct Op {
  std::function<absl::Status(int iteration)> call;
};

std::vector<float> Filled(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// The state lives in the returned closure (shared_ptr: std::function must be copyable).
absl::StatusOr<Op> MakeOp(const std::string& name, transport::Communicator& comm,
                          const RankOptions& o, compression::Compressor c) {
  const std::chrono::milliseconds timeout{std::chrono::seconds(o.timeout_s)};
  const int P = comm.size(), r = comm.rank();
  auto data = std::make_shared<std::vector<float>>(Filled(o.count, 1 + r));
  if (name == "allreduce") {
    return Op{[&comm, data, timeout](int) {
      collectives::AllReduceOptions a;
      a.comm = &comm;
      a.timeout = timeout;
      a.data = data->data();
      a.count = data->size();
      a.op = ReduceOp::kAverage;
      return collectives::RingAllReduce(a);
    }};
  }
  if (name == "clps") {
    auto delta = std::make_shared<std::vector<float>>(o.count, 0.0f);
    auto epsilon = std::make_shared<std::vector<float>>(o.count, 0.0f);
    auto workspace = std::make_shared<::herd::lowprec::LowPrecisionWorkspace>();
    return Op{[&comm, data, delta, epsilon, workspace, timeout, c](int it) {
      ::herd::lowprec::CentralizedLowPrecisionOptions a;
      a.comm = &comm;
      a.timeout = timeout;
      a.data = data->data();
      a.count = data->size();
      a.compressor = c;
      a.delta = delta->data();
      a.epsilon = epsilon->data();
      a.average = true;
      a.seed = uint64_t(it);
      a.workspace = workspace.get();
      return ::herd::lowprec::CentralizedLowPrecisionAllReduce(a);
    }};
  }
  if (name == "decentralized") {
    return Op{[&comm, data, timeout, P, r, seg = o.segment_bytes](int it) {
      decentralized::DecentralizedFullPrecisionOptions a;
      a.segment_bytes = seg;
      a.comm = &comm;
      a.timeout = timeout;
      a.data = data->data();
      a.count = data->size();
      a.peers = PeersForIteration(Topology::kRing, P, 0, it, r);
      return decentralized::DecentralizedFullPrecision(a);
    }};
  }
  if (name == "decentralized_lp") {
    struct State {
      std::vector<float> self;
      std::vector<std::vector<float>> replicas;
      decentralized::DecentralizedLowPrecisionOptions options;
    };
    auto s = std::make_shared<State>();
    s->options.comm = &comm;
    s->options.timeout = timeout;
    s->options.data = data->data();
    s->options.count = data->size();
    s->options.peers = PeersForIteration(Topology::kRing, P, 0, 0, r);
    s->options.compressor = c;
    s->options.segment_values = std::max<size_t>(1, o.segment_bytes / sizeof(float));
    s->self.resize(o.count);
    s->replicas.assign(s->options.peers.size(), std::vector<float>(o.count));
    s->options.self_replica = s->self.data();
    for (auto& rep : s->replicas) s->options.peer_replicas.push_back(rep.data());
    HERD_RETURN_IF_ERROR(decentralized::InitDecentralizedReplicas(s->options));
    return Op{[data, s](int it) {
      s->options.seed = uint64_t(it);
      return decentralized::DecentralizedLowPrecision(s->options);
    }};
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "unknown operation '%s' (clps, decentralized, decentralized_lp, allreduce)", name));
}

absl::Status Run(const RankOptions& o) {
  HERD_ASSIGN_OR_RETURN(auto store, transport::MakeFileStore(o.store_dir));
  transport::UcxOptions ucx;
  ucx.prefix = "lowprec";
  HERD_ASSIGN_OR_RETURN(auto comm, transport::CreateUcxCommunicator(o.rank, o.ranks, store, ucx));
  HERD_ASSIGN_OR_RETURN(auto c, compression::ParseCompressor(o.compressor));
  const auto timeout = std::chrono::seconds(o.timeout_s);
  for (const std::string& name : o.ops) {
    HERD_ASSIGN_OR_RETURN(Op op, MakeOp(name, *comm, o, c));
    int it = 0;
    for (int w = 0; w < o.warmup; ++w) HERD_RETURN_IF_ERROR(op.call(it++));
    HERD_RETURN_IF_ERROR(Barrier(*comm, Deadline::After(timeout)));
    const auto start = Clock::now();
    for (int i = 0; i < o.iters; ++i) HERD_RETURN_IF_ERROR(op.call(it++));
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    std::printf("result %s %.9f\n", name.c_str(), seconds / o.iters);
    std::fflush(stdout);
    HERD_RETURN_IF_ERROR(Barrier(*comm, Deadline::After(timeout)));
  }
  return absl::OkStatus();
}

}  // namespace

int RunRank(const RankOptions& o) {
  if (absl::Status st = Run(o); !st.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", o.rank, st.ToString().c_str());
    std::fflush(stderr);
    return 1;
  }
  return 0;
}

}  // namespace herd::bench::lowprec
