#include "bench/emulator/probe.h"

#include <cstdio>
#include <memory>
#include <vector>

#include "absl/strings/str_format.h"
#include "algorithms/collectives/allreduce.h"
#include "bench/emulator/mode_probes.h"
#include "bench/rank_sync.h"
#include "common/status.h"
#include "transport/store/store.h"
#include "transport/ucx/ucx_communicator.h"

namespace herd::emulator {
namespace {

using transport::Communicator;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

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
  ProbeResult result{"stream", comm.size(), o.bytes, o.iters, Since(start), 0};
  result.bits_per_s = 8.0 * static_cast<double>(o.bytes) * o.iters / result.seconds;
  return result;
}

absl::Status AllReduceOnce(Communicator& comm, std::vector<float>& data, const Deadline& d) {
  collectives::AllReduceOptions a;
  a.comm = &comm;
  a.data = data.data();
  a.count = data.size();
  a.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(d.remaining());
  return collectives::RingAllReduce(a);
}

absl::StatusOr<ProbeResult> AllReduce(Communicator& comm, const ProbeOptions& o) {
  const Deadline deadline = Deadline::After(o.timeout);
  std::vector<float> data(o.bytes / sizeof(float), 1.0f);
  for (int i = 0; i < o.warmup; ++i) HERD_RETURN_IF_ERROR(AllReduceOnce(comm, data, deadline));
  HERD_RETURN_IF_ERROR(bench::Barrier(comm, deadline));
  const auto start = Clock::now();
  for (int i = 0; i < o.iters; ++i) HERD_RETURN_IF_ERROR(AllReduceOnce(comm, data, deadline));
  // The slowest rank's time: the all-reduce is done when every rank has its result.
  double seconds = Since(start) / o.iters;
  collectives::AllReduceOptions m;
  m.comm = &comm;
  m.dtype = DType::kFloat64;
  m.op = ReduceOp::kMax;
  m.data = &seconds;
  m.count = 1;
  m.tag = 1;
  HERD_RETURN_IF_ERROR(collectives::RingAllReduce(m));
  ProbeResult result{"allreduce", comm.size(), data.size() * sizeof(float), o.iters, seconds, 0};
  result.bits_per_s = 8.0 * static_cast<double>(result.bytes) / seconds;
  return result;
}

}  // namespace

int RunProbeRank(const ProbeOptions& o) {
  auto fail = [&](const absl::Status& st) {
    std::fprintf(stderr, "rank %d: %s\n", o.rank, st.ToString().c_str());
    std::fflush(stderr);
    return 1;
  };
  if (o.iters < 1 || o.warmup < 0 || o.bytes < sizeof(float)) {
    return fail(absl::InvalidArgumentError("need iters >= 1, warmup >= 0, bytes >= 4"));
  }
  auto store = transport::MakeFileStore(o.store_dir);
  if (!store.ok()) return fail(store.status());
  transport::UcxOptions ucx;
  ucx.prefix = "emu";
  auto comm = transport::CreateUcxCommunicator(o.rank, o.ranks, *store, ucx);
  if (!comm.ok()) return fail(comm.status());
  auto result = o.probe == "stream"      ? Stream(**comm, o)
                : o.probe == "allreduce" ? AllReduce(**comm, o)
                : IsModeProbe(o.probe)   ? RunModeProbe(**comm, o)
                                         : absl::InvalidArgumentError(absl::StrFormat(
                                               "unknown probe '%s' (stream, allreduce, ring, "
                                                 "sparse, topk_allgather, clps, decentralized, "
                                                 "decentralized_whole)",
                                               o.probe));
  if (!result.ok()) return fail(result.status());
  if (o.rank == 0) {
    std::printf("%s\n", ToJsonLine(*result).c_str());
    std::fflush(stdout);
  }
  return 0;
}

std::string ToJsonLine(const ProbeResult& r) {
  return bench::JsonLineWriter()
      .Add("probe", r.probe)
      .Add("ranks", r.ranks)
      .Add("bytes", uint64_t{r.bytes})
      .Add("iters", r.iters)
      .Add("seconds", r.seconds)
      .Add("bits_per_s", r.bits_per_s)
      .Add("density", r.density)
      .str();
}

absl::StatusOr<ProbeResult> ParseProbeResult(std::string_view line) {
  HERD_ASSIGN_OR_RETURN(const bench::JsonObject o, bench::ParseJsonLine(line));
  ProbeResult r;
  HERD_ASSIGN_OR_RETURN(r.probe, bench::GetString(o, "probe"));
  HERD_ASSIGN_OR_RETURN(const double ranks, bench::GetNumber(o, "ranks"));
  HERD_ASSIGN_OR_RETURN(const double bytes, bench::GetNumber(o, "bytes"));
  HERD_ASSIGN_OR_RETURN(const double iters, bench::GetNumber(o, "iters"));
  HERD_ASSIGN_OR_RETURN(r.seconds, bench::GetNumber(o, "seconds"));
  HERD_ASSIGN_OR_RETURN(r.bits_per_s, bench::GetNumber(o, "bits_per_s"));
  if (o.contains("density")) {
    HERD_ASSIGN_OR_RETURN(r.density, bench::GetNumber(o, "density"));
  }
  r.ranks = static_cast<int>(ranks);
  r.bytes = static_cast<size_t>(bytes);
  r.iters = static_cast<int>(iters);
  return r;
}

}  // namespace herd::emulator
