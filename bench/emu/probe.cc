#include "bench/emu/probe.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"
#include "bench/percall/per_call.h"
#include "bench/rank.h"
#include "bench/rank_sync.h"
#include "common/status.h"

namespace herd::emulator {
namespace {

using transport::Communicator;

absl::StatusOr<ProbeResult> Stream(Communicator& comm, const ProbeOptions& o) {
  if (comm.size() < 2) return absl::InvalidArgumentError("the stream probe needs 2 ranks");
  const Deadline deadline = Deadline::After(o.timeout);
  std::vector<char> buf[2] = {std::vector<char>(o.bytes, 'x'), std::vector<char>(o.bytes)};
  char ack = 0;
  HERD_RETURN_IF_ERROR(bench::Barrier(comm, deadline));
  const auto start = Clock::now();
  if (comm.rank() <= 1) {
    const bool sender = comm.rank() == 0;
    transport::Request inflight[2];
    for (int m = 0; m < o.iters; ++m) {
      transport::Request& slot = inflight[m % 2];
      HERD_RETURN_IF_ERROR(comm.wait(slot, deadline));
      const auto tag = transport::Tag::Make(transport::OpKind::kUser, 1, static_cast<uint32_t>(m));
      slot = sender ? comm.isend(1, tag, AsBytes(buf[0].data(), o.bytes))
                    : comm.irecv(0, tag, AsMutableBytes(buf[m % 2].data(), o.bytes));
    }
    HERD_RETURN_IF_ERROR(comm.WaitAll({&inflight[0], &inflight[1]}, deadline));
    const auto ack_tag = transport::Tag::Make(transport::OpKind::kUser, 2, 0);
    transport::Request r = sender ? comm.irecv(1, ack_tag, AsMutableBytes(&ack, 1))
                                  : comm.isend(0, ack_tag, AsBytes(&ack, 1));
    HERD_RETURN_IF_ERROR(comm.wait(r, deadline));
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ProbeResult r;
  r.probe = "stream";
  r.ranks = comm.size();
  r.ranks_per_host = o.ranks_per_host;
  r.bytes = o.bytes;
  r.iters = o.iters;
  r.seconds = seconds;
  r.bits_per_s = 8.0 * static_cast<double>(o.bytes) * o.iters / seconds;
  return r;
}

// allreduce and the mode probes: the calls of bench/percall/ops.h, timed by TimeCalls.
absl::StatusOr<ProbeResult> Calls(Communicator& inner, const ProbeOptions& o) {
  const bool sparse = o.probe == "sparse" || o.probe == "topk_allgather";
  if (o.density <= 0 || o.density > 1) {
    return absl::InvalidArgumentError(absl::StrFormat("density %g is not in (0, 1]", o.density));
  }
  bench::TimedCommunicator comm(inner);
  bench::OpParams params;
  params.count = o.bytes / sizeof(float);
  params.density = o.density;
  params.timeout = o.timeout;
  const std::string op = o.probe == "allreduce"        ? o.algo
                         : o.probe == "sparse"         ? "spardl"
                         : o.probe == "topk_allgather" ? "topa"
                                                       : o.probe;
  const std::vector<float> gradient = bench::Gradient(params.count, comm.rank());
  std::vector<float> data = gradient;
  HERD_ASSIGN_OR_RETURN(bench::OpCall call, bench::MakeOp(op, comm, params, data.data()));
  const bench::Timing timing{o.warmup, o.iters, /*per_call=*/o.probe != "allreduce"};
  HERD_ASSIGN_OR_RETURN(std::vector<bench::RankTimes> all,
                        bench::TimeCalls(comm, call, gradient, data, timing, o.timeout));
  HERD_RETURN_IF_ERROR(bench::Barrier(comm, Deadline::After(o.timeout)));
  ProbeResult result;
  result.probe = o.probe;
  result.algo = o.probe == "allreduce" ? o.algo : "";
  result.ranks = comm.size();
  result.ranks_per_host = o.ranks_per_host;
  result.bytes = params.count * sizeof(float);
  result.iters = o.iters;
  result.density = sparse ? o.density : 0;
  for (const bench::RankTimes& t : all) {
    result.seconds = std::max(result.seconds, timing.per_call ? t.median_s : t.mean_s);
  }
  result.bits_per_s = 8.0 * static_cast<double>(result.bytes) / result.seconds;
  return result;
}

const json::Field<ProbeResult> kProbeFields[] = {
    {"probe", &ProbeResult::probe},
    {"algo", &ProbeResult::algo, /*optional=*/true},
    {"ranks", &ProbeResult::ranks},
    {"ranks_per_host", &ProbeResult::ranks_per_host, /*optional=*/true},
    {"bytes", &ProbeResult::bytes},
    {"iters", &ProbeResult::iters},
    {"seconds", &ProbeResult::seconds},
    {"bits_per_s", &ProbeResult::bits_per_s},
    {"density", &ProbeResult::density, /*optional=*/true}};

}  // namespace

bool IsModeProbe(std::string_view name) {
  return name == "ring" || name == "sparse" || name == "topk_allgather" || name == "clps" ||
         name == "decentralized" || name == "decentralized_whole";
}

int RunProbeRank(const ProbeOptions& o) {
  transport::UcxOptions ucx;
  ucx.prefix = "emu";
  return bench::RunRank(o.rank, ucx, [&](Communicator& comm) -> absl::Status {
    if (o.iters < 1 || o.warmup < 0 || o.bytes < sizeof(float)) {
      return absl::InvalidArgumentError("need iters >= 1, warmup >= 0, bytes >= 4");
    }
    absl::StatusOr<ProbeResult> result =
        o.probe == "stream" ? Stream(comm, o)
        : o.probe == "allreduce" || IsModeProbe(o.probe)
            ? Calls(comm, o)
            : absl::InvalidArgumentError(absl::StrFormat("unknown probe '%s' (stream, allreduce, "
                                                         "ring, sparse, topk_allgather, clps, "
                                                         "decentralized, decentralized_whole)",
                                                         o.probe));
    if (!result.ok()) return result.status();
    if (comm.rank() == 0) bench::PrintLine(ToJson(*result));
    return absl::OkStatus();
  });
}

absl::StatusOr<ProbeResult> MeasureInCluster(const Cluster& cluster, const std::string& exe,
                                             const ProbeOptions& probe) {
  // The probes print nothing until they are done: the silence timeout is the probe's own.
  HERD_ASSIGN_OR_RETURN(
      const std::vector<json::Object> lines,
      bench::RunRanks(
          probe.probe,
          {exe, "probe-rank", "--probe", probe.probe, "--bytes", absl::StrCat(probe.bytes),
           "--iters", absl::StrCat(probe.iters), "--warmup", absl::StrCat(probe.warmup),
           "--density", absl::StrFormat("%.17g", probe.density), "--algo", probe.algo,
           "--ranks-per-host", absl::StrCat(probe.ranks_per_host), "--timeout",
           absl::StrCat(probe.timeout.count())},
          cluster.ranks(), probe.timeout + std::chrono::seconds(30),
          [&](int rank, ChildSpec child) { return cluster.Launch(rank, child); }));
  return ProbeResultFromJson(lines.front());
}

json::Object ToJson(const ProbeResult& r) { return json::ToObject(r, kProbeFields); }

absl::StatusOr<ProbeResult> ProbeResultFromJson(const json::Object& line) {
  ProbeResult r;
  HERD_RETURN_IF_ERROR(json::FromObject(line, kProbeFields, r));
  return r;
}

}  // namespace herd::emulator
