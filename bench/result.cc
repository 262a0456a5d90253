#include "bench/result.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_format.h"
#include "bench/sizes.h"
#include "common/deadline.h"
#include "common/status.h"

namespace herd::bench {
namespace {

const json::Field<BenchResult> kResultFields[] = {
    {"impl", &BenchResult::impl},
    {"op", &BenchResult::op},
    {"algo", &BenchResult::algo},
    {"ranks", &BenchResult::ranks},
    {"bytes", &BenchResult::bytes},
    {"requested_bytes", &BenchResult::requested_bytes},
    {"dtype", &BenchResult::dtype},
    {"iters", &BenchResult::iters},
    {"time_us", &BenchResult::time_us},  // null when not measured
    {"algbw_gbps", &BenchResult::algbw_gbps},
    {"busbw_gbps", &BenchResult::busbw_gbps},
    {"check", &BenchResult::check},
    {"wait_us", &BenchResult::wait_us, /*optional=*/true},
    {"detail", &BenchResult::detail, /*optional=*/true}};

}  // namespace

bool BenchResult::measured() const { return std::isfinite(time_us) && time_us > 0; }

double AlgBandwidthGBps(size_t bytes, double seconds) {
  if (!(seconds > 0)) return 0.0;
  return static_cast<double>(bytes) / seconds / 1e9;
}

BenchResult MakeResult(std::string impl, BenchOp op, std::string algo, int ranks, size_t bytes,
                       size_t requested_bytes, std::string dtype, int iters,
                       double seconds_per_iter) {
  const double algbw = AlgBandwidthGBps(bytes, seconds_per_iter);
  return BenchResult{std::move(impl),
                     std::string(BenchOpName(op)),
                     std::move(algo),
                     ranks,
                     bytes,
                     requested_bytes,
                     std::move(dtype),
                     iters,
                     seconds_per_iter * 1e6,
                     algbw * 8.0,
                     algbw * BusBandwidthFactor(op, ranks) * 8.0};
}

BenchResult MakeUnmeasured(std::string impl, BenchOp op, std::string algo, int ranks,
                           size_t requested_bytes, std::string dtype, std::string why) {
  BenchResult r = MakeResult(std::move(impl), op, std::move(algo), ranks, 0, requested_bytes,
                             std::move(dtype), 0, std::numeric_limits<double>::quiet_NaN());
  r.detail = std::move(why);
  return r;
}

json::Object ToJson(const BenchResult& r) { return json::ToObject(r, kResultFields); }
std::string ToJsonLine(const BenchResult& r) { return ToJson(r).Write(); }

absl::StatusOr<BenchResult> ParseResultLine(std::string_view line) {
  BenchResult r;
  auto object = json::ParseObject(line);
  absl::Status st = object.ok() ? json::FromObject(*object, kResultFields, r) : object.status();
  if (!st.ok()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("not a result line (%s): %s", std::string(st.message()), line));
  }
  if (r.check != kCheckOk && r.check != kCheckFailed && r.check != kCheckOff) {
    return absl::InvalidArgumentError(
        absl::StrFormat("bad check value '%s' in: %s", r.check, line));
  }
  return r;
}

absl::StatusOr<RankReport> MeasurePoint(const SweepSpec& spec, size_t requested,
                                        const PointHooks& hooks) {
  const int iters = IterationsFor(spec, requested);
  const int warmup =
      hooks.first_in_process ? FirstPointWarmupFor(spec, requested) : WarmupFor(spec, requested);
  auto progress = [&](const char* phase, int done, int total) {
    if (hooks.progress) hooks.progress(phase, done, total);
  };
  RankReport report;
  if (spec.check) {
    hooks.prepare();
    HERD_RETURN_IF_ERROR(hooks.barrier());
    HERD_RETURN_IF_ERROR(hooks.call());
    const std::optional<Mismatch> bad = hooks.verify();
    report.checked = 1;
    report.check_ok = bad ? 0 : 1;
    if (bad) {
      report.bad_index = bad->index;
      report.got = bad->got;
      report.expected = bad->expected;
    }
  }
  for (int i = 0; i < warmup; ++i) {
    HERD_RETURN_IF_ERROR(hooks.call());
    progress("warm-up", i + 1, warmup);
  }
  HERD_RETURN_IF_ERROR(hooks.barrier());
  const auto start = Clock::now();
  for (int i = 0; i < iters; ++i) {
    HERD_RETURN_IF_ERROR(hooks.call());
    progress("timed", i + 1, iters);
  }
  report.seconds_per_iter = std::chrono::duration<double>(Clock::now() - start).count() / iters;
  return report;
}

BenchResult Summarise(const Measurement& m, const std::vector<RankReport>& reports) {
  double slowest = 0, waited = 0;
  bool wait_known = !reports.empty();
  for (const RankReport& r : reports) {
    slowest = std::max(slowest, r.seconds_per_iter);
    waited += r.waited_per_iter;
    wait_known &= r.waited_per_iter >= 0;
  }
  const int ranks = static_cast<int>(reports.size());
  BenchResult result =
      MakeResult(m.impl, m.op, m.algo, ranks, m.count * DTypeSize(m.dtype), m.requested_bytes,
                 std::string(DTypeName(m.dtype)), m.iters, slowest);
  if (wait_known) result.wait_us = waited / ranks * 1e6;
  if (!m.check) return result;
  result.check = std::string(kCheckOk);
  for (int rank = 0; rank < ranks; ++rank) {
    const RankReport& r = reports[rank];
    if (r.checked && !r.check_ok) {
      result.check = std::string(kCheckFailed);
      result.detail = absl::StrFormat("%s %s %s %s: rank %d element %u is %g, expected %g", m.impl,
                                      BenchOpName(m.op), m.algo, FormatByteSize(m.requested_bytes),
                                      rank, r.bad_index, r.got, r.expected);
      break;
    }
  }
  return result;
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<ptrdiff_t>(mid), values.end());
  if (values.size() % 2 == 1) return values[mid];
  const double lower =
      *std::max_element(values.begin(), values.begin() + static_cast<ptrdiff_t>(mid));
  return (lower + values[mid]) / 2;
}

}  // namespace herd::bench
