#include "bench/percall/per_call.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>

#include "absl/strings/str_format.h"
#include "bench/rank_sync.h"
#include "bench/result.h"
#include "bench/rank.h"
#include "common/status.h"
#include "transport/loopback/loopback_communicator.h"

namespace herd::bench {
namespace {

double Checksum(const std::vector<float>& v) {
  double s = 0;
  for (size_t i = 0; i < v.size(); ++i) s += v[i] * double(i % 1009 + 1);
  return s;
}

}  // namespace

absl::StatusOr<std::vector<RankTimes>> TimeCalls(TimedCommunicator& comm, const OpCall& call,
                                                 const std::vector<float>& input,
                                                 std::vector<float>& data, const Timing& t,
                                                 std::chrono::milliseconds timeout) {
  std::vector<double> times;
  double waited = 0;
  auto timed = [&](auto&& body) -> absl::Status {
    comm.reset();
    const auto start = Clock::now();
    HERD_RETURN_IF_ERROR(body());
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    waited += comm.waited_seconds();
    return absl::OkStatus();
  };
  int64_t it = 0;
  for (; it < t.warmup; ++it) {
    if (t.per_call) std::copy(input.begin(), input.end(), data.begin());
    HERD_RETURN_IF_ERROR(call(it));
  }
  if (!t.per_call) HERD_RETURN_IF_ERROR(Barrier(comm, Deadline::After(timeout)));
  if (t.per_call) {
    for (; it < t.warmup + t.iters; ++it) {
      std::copy(input.begin(), input.end(), data.begin());
      HERD_RETURN_IF_ERROR(Barrier(comm, Deadline::After(timeout)));
      HERD_RETURN_IF_ERROR(timed([&] { return call(it); }));
    }
  } else {
    HERD_RETURN_IF_ERROR(timed([&]() -> absl::Status {
      for (; it < t.warmup + t.iters; ++it) HERD_RETURN_IF_ERROR(call(it));
      return absl::OkStatus();
    }));
    times.assign(t.iters, times[0] / t.iters);  // the loop's mean stands for every call
  }
  RankTimes mine;
  for (double s : times) mine.mean_s += s / static_cast<double>(times.size());
  mine.median_s = Median(times);
  mine.min_s = times.empty() ? 0 : *std::min_element(times.begin(), times.end());
  mine.waited_s = times.empty() ? 0 : waited / static_cast<double>(times.size());
  mine.checksum = Checksum(data);
  mine.nonzeros = std::count_if(data.begin(), data.end(), [](float v) { return v != 0; });
  return GatherToRoot(comm, mine, Deadline::After(timeout));
}

const json::Field<Row> kRowFields[] = {
    {"transport", &Row::transport}, {"algo", &Row::algo},       {"ranks", &Row::ranks},
    {"count", &Row::count},         {"density", &Row::density}, {"teams", &Row::teams},
    {"iters", &Row::iters},         {"mean_ms", &Row::mean_ms}, {"median_ms", &Row::median_ms},
    {"min_ms", &Row::min_ms},       {"wait_ms", &Row::wait_ms}, {"nonzeros", &Row::nonzeros},
    {"identical", &Row::identical}};

json::Object ToJson(const Row& r) { return json::ToObject(r, kRowFields); }

absl::StatusOr<Row> RowFromJson(const json::Object& line) {
  Row r;
  HERD_RETURN_IF_ERROR(json::FromObject(line, kRowFields, r));
  return r;
}

absl::StatusOr<std::vector<Row>> MeasureRows(
    transport::Communicator& inner, const PerCallSpec& spec,
    const std::function<void(const std::string&)>& progress) {
  TimedCommunicator comm(inner);
  const int P = comm.size(), rank = comm.rank();
  const std::vector<float> gradient = Gradient(spec.params.count, rank);
  std::vector<float> data = gradient;
  std::vector<Row> rows;
  for (const std::string& name : spec.ops) {
    if (rank == 0 && progress) progress(absl::StrFormat("%s: %d ranks", name, P));
    auto where = [&](const absl::Status& st) {
      return absl::Status(st.code(), absl::StrFormat("%s (rank %d of %d): %s", name, rank, P,
                                                     std::string(st.message())));
    };
    data = gradient;
    auto call = MakeOp(name, comm, spec.params, data.data());
    if (!call.ok()) return where(call.status());
    auto all = TimeCalls(comm, *call, gradient, data, spec.timing, spec.params.timeout);
    if (!all.ok()) return where(all.status());
    if (rank != 0) continue;
    Row row{std::string(inner.backend()),
            name,
            P,
            spec.params.count,
            name == "ring" ? 1.0 : spec.params.density,
            name == "spardl" ? spec.params.teams : 1,
            spec.timing.iters};
    row.nonzeros = (*all)[0].nonzeros;
    row.identical = true;
    const RankTimes* slowest = &(*all)[0];
    for (const RankTimes& t : *all) {
      if (t.mean_s > slowest->mean_s) slowest = &t;
      row.wait_ms += t.waited_s * 1e3 / P;
      // The checksum of equal vectors is the same double, bit for bit.
      row.identical &= std::memcmp(&t.checksum, &(*all)[0].checksum, sizeof(double)) == 0;
    }
    row.mean_ms = slowest->mean_s * 1e3;
    row.median_ms = slowest->median_s * 1e3;
    row.min_ms = slowest->min_s * 1e3;
    rows.push_back(row);
  }
  // Nobody tears its communicator down while a peer may still be sending to it.
  HERD_RETURN_IF_ERROR(Barrier(comm, Deadline::After(spec.params.timeout)));
  return rows;
}

absl::StatusOr<std::vector<Row>> RunLoopback(int ranks, const PerCallSpec& spec) {
  auto comms = transport::MakeLoopbackCommunicators(ranks);
  std::vector<absl::StatusOr<std::vector<Row>>> results(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      results[r] = MeasureRows(*comms[r], spec, [](const std::string& line) {
        std::fprintf(stderr, "loopback: %s\n", line.c_str());
      });
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < ranks; ++r) {
    if (!results[r].ok()) return results[r].status();
  }
  return std::move(results[0]).value();
}

absl::StatusOr<std::vector<Row>> RunUcxProcesses(int ranks, const std::vector<std::string>& argv,
                                                 std::chrono::milliseconds timeout) {
  HERD_ASSIGN_OR_RETURN(
      std::vector<json::Object> lines,
      RunRanks("ucx", argv, ranks,
               std::max<std::chrono::milliseconds>(2 * timeout, std::chrono::minutes(5))));
  std::vector<Row> rows;
  for (const json::Object& line : lines) {
    HERD_ASSIGN_OR_RETURN(Row row, RowFromJson(line));
    rows.push_back(std::move(row));
  }
  return rows;
}

int RunPerCallRank(const RankFlags& flags, const PerCallSpec& spec) {
  transport::UcxOptions ucx;
  ucx.prefix = "per-call";
  return RunRank(flags, ucx, [&](transport::Communicator& comm) -> absl::Status {
    HERD_ASSIGN_OR_RETURN(std::vector<Row> rows,
                          MeasureRows(comm, spec, [](const std::string& line) {
                            PrintLine(json::Object().Add(kProgressKey, line));
                          }));
    for (const Row& row : rows) PrintLine(ToJson(row));
    return absl::OkStatus();
  });
}

}  // namespace herd::bench
