// The per-rank side of herd_sparse_bench: buffers, the timed loop of each algorithm, and the
// gather of every rank's timings to rank 0.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>

#include "absl/strings/str_format.h"
#include "algorithms/collectives/allreduce.h"
#include "bench/rank_sync.h"
#include "bench/sparse/sparse_bench.h"
#include "bench/timed_communicator.h"
#include "common/status.h"

namespace herd::bench::sparse {
namespace {

namespace hs = herd::sparse;

// What each rank sends rank 0 about one algorithm (plain data: the ranks are one binary).
struct RankTimes {
  double mean_s = 0;
  double median_s = 0;
  double min_s = 0;
  double waited_s = 0;
  double checksum = 0;
  uint64_t nonzeros = 0;
};

// Outside every collective's tags: OpKind::kUser, an id of its own (bench/rank_sync.h uses 0xbe).
constexpr uint32_t kTimesTagId = 0xbf;

absl::StatusOr<std::vector<RankTimes>> GatherTimes(transport::Communicator& comm,
                                                   const RankTimes& mine, Deadline deadline) {
  const transport::Tag tag = transport::Tag::Make(transport::OpKind::kUser, kTimesTagId, 0);
  if (comm.rank() != 0) {
    transport::Request send = comm.isend(0, tag, AsBytes(&mine, sizeof mine));
    HERD_RETURN_IF_ERROR(comm.WaitAll({&send}, deadline));
    return std::vector<RankTimes>{};
  }
  std::vector<RankTimes> all(comm.size());
  all[0] = mine;
  std::vector<transport::Request> recvs;
  for (int peer = 1; peer < comm.size(); ++peer) {
    recvs.push_back(comm.irecv(peer, tag, AsMutableBytes(&all[peer], sizeof(RankTimes))));
  }
  HERD_RETURN_IF_ERROR(comm.WaitAll(absl::MakeSpan(recvs), deadline));
  return all;
}

// Rank r's gradient: heavy-tailed (a normal times a log-normal scale, as gradients are), from a
// fixed hash so that every run measures the same inputs.
void FillGradient(int rank, std::vector<float>& g) {
  uint64_t x = 0x5eedull ^ (uint64_t(rank) << 32);
  auto next = [&x] {
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
}

double Checksum(const std::vector<float>& v) {
  double s = 0;
  for (size_t i = 0; i < v.size(); ++i) s += v[i] * double(i % 1009 + 1);
  return s;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

absl::StatusOr<std::vector<SparseBenchRow>> MeasureOnCommunicator(
    transport::Communicator& inner, const SparseBenchSpec& spec,
    const std::function<void(const std::string&)>& progress) {
  TimedCommunicator comm(inner);
  const int P = comm.size(), rank = comm.rank();
  std::vector<float> gradient(spec.count), data(spec.count), residual(spec.count);
  FillGradient(rank, gradient);
  std::vector<SparseBenchRow> rows;

  for (const std::string& algo : spec.algos) {
    if (rank == 0 && progress) progress(absl::StrFormat("%s: %d ranks", algo, P));
    std::fill(residual.begin(), residual.end(), 0.0f);
    hs::BsagState bsag;
    auto call = [&]() -> absl::Status {
      if (algo == "ring") {
        collectives::AllReduceOptions o;
        o.comm = &comm;
        o.data = data.data();
        o.count = spec.count;
        o.op = ReduceOp::kAverage;
        o.tag = 1;
        o.timeout = spec.timeout;
        return collectives::RingAllReduce(o);
      }
      hs::SparseAllReduceOptions o;
      o.comm = &comm;
      o.data = data.data();
      o.residual = residual.data();
      o.count = spec.count;
      o.density = spec.density;
      o.teams = spec.teams;
      o.sag = spec.sag;
      o.topk = spec.topk;
      o.bsag = &bsag;
      o.tag = 1;
      o.timeout = spec.timeout;
      if (algo == "spardl") return hs::SparDLAllReduce(o);
      if (algo == "topa") return hs::TopkAllGatherAllReduce(o);
      return absl::InvalidArgumentError(
          absl::StrFormat("unknown algorithm '%s'; expected spardl, topa or ring", algo));
    };

    std::vector<double> times;
    double waited = 0;
    for (int it = 0; it < spec.warmup + spec.iters; ++it) {
      std::memcpy(data.data(), gradient.data(), spec.count * sizeof(float));
      HERD_RETURN_IF_ERROR(Barrier(comm, Deadline::After(spec.timeout)));
      comm.reset();
      const auto start = Clock::now();
      absl::Status st = call();
      const double s = std::chrono::duration<double>(Clock::now() - start).count();
      if (!st.ok()) {
        return absl::Status(st.code(), absl::StrFormat("%s (rank %d of %d, call %d): %s", algo,
                                                       rank, P, it, std::string(st.message())));
      }
      if (it >= spec.warmup) {
        times.push_back(s);
        waited += comm.waited_seconds();
      }
    }
    RankTimes mine;
    for (double t : times) mine.mean_s += t / static_cast<double>(times.size());
    mine.median_s = Median(times);
    mine.min_s = times.empty() ? 0 : *std::min_element(times.begin(), times.end());
    mine.waited_s = times.empty() ? 0 : waited / static_cast<double>(times.size());
    mine.checksum = Checksum(data);
    mine.nonzeros = static_cast<uint64_t>(
        std::count_if(data.begin(), data.end(), [](float v) { return v != 0; }));
    HERD_ASSIGN_OR_RETURN(std::vector<RankTimes> all,
                          GatherTimes(comm, mine, Deadline::After(spec.timeout)));
    if (rank != 0) continue;

    SparseBenchRow row;
    row.transport = std::string(inner.backend());
    row.algo = algo;
    row.ranks = P;
    row.count = spec.count;
    row.density = algo == "ring" ? 1.0 : spec.density;
    row.teams = algo == "spardl" ? spec.teams : 1;
    row.iters = spec.iters;
    row.nonzeros = mine.nonzeros;
    row.identical = true;
    const RankTimes* slowest = &all[0];
    for (const RankTimes& t : all) {
      if (t.mean_s > slowest->mean_s) slowest = &t;
      row.wait_ms += t.waited_s * 1e3 / P;
      // The checksum of equal vectors is the same double, bit for bit.
      row.identical =
          row.identical && std::memcmp(&t.checksum, &all[0].checksum, sizeof(double)) == 0;
    }
    row.mean_ms = slowest->mean_s * 1e3;
    row.median_ms = slowest->median_s * 1e3;
    row.min_ms = slowest->min_s * 1e3;
    rows.push_back(row);
  }
  // Nobody tears its communicator down while a peer may still be sending to it.
  HERD_RETURN_IF_ERROR(Barrier(comm, Deadline::After(spec.timeout)));
  return rows;
}

}  // namespace herd::bench::sparse
