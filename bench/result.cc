#include "bench/result.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"
#include "bench/json_line.h"

namespace herd::bench {

bool BenchResult::measured() const { return std::isfinite(time_us) && time_us > 0; }

double AlgBandwidthGBps(size_t bytes, double seconds) {
  if (!(seconds > 0)) return 0.0;
  return static_cast<double>(bytes) / seconds / 1e9;
}

BenchResult MakeResult(std::string impl, BenchOp op, std::string algo, int ranks, size_t bytes,
                       size_t requested_bytes, std::string dtype, int iters,
                       double seconds_per_iter) {
  BenchResult r;
  r.impl = std::move(impl);
  r.op = std::string(BenchOpName(op));
  r.algo = std::move(algo);
  r.ranks = ranks;
  r.bytes = bytes;
  r.requested_bytes = requested_bytes;
  r.dtype = std::move(dtype);
  r.iters = iters;
  r.time_us = seconds_per_iter * 1e6;
  const double algbw = AlgBandwidthGBps(bytes, seconds_per_iter);
  r.algbw_gbps = algbw * 8.0;
  r.busbw_gbps = algbw * BusBandwidthFactor(op, ranks) * 8.0;
  return r;
}

BenchResult MakeUnmeasured(std::string impl, BenchOp op, std::string algo, int ranks,
                           size_t requested_bytes, std::string dtype, std::string why) {
  BenchResult r;
  r.impl = std::move(impl);
  r.op = std::string(BenchOpName(op));
  r.algo = std::move(algo);
  r.ranks = ranks;
  r.requested_bytes = requested_bytes;
  r.dtype = std::move(dtype);
  r.time_us = std::numeric_limits<double>::quiet_NaN();
  r.algbw_gbps = r.busbw_gbps = 0;
  r.detail = std::move(why);
  return r;
}

std::string ToJsonLine(const BenchResult& r) {
  JsonLineWriter w;
  w.Add("impl", r.impl)
      .Add("op", r.op)
      .Add("algo", r.algo)
      .Add("ranks", r.ranks)
      .Add("bytes", uint64_t{r.bytes})
      .Add("requested_bytes", uint64_t{r.requested_bytes})
      .Add("dtype", r.dtype)
      .Add("iters", r.iters)
      .Add("time_us", r.time_us)  // null when not measured
      .Add("algbw_gbps", r.algbw_gbps)
      .Add("busbw_gbps", r.busbw_gbps)
      .Add("check", r.check);
  if (std::isfinite(r.wait_us)) w.Add("wait_us", r.wait_us);
  if (!r.detail.empty()) w.Add("detail", r.detail);
  return w.str();
}

absl::StatusOr<BenchResult> ParseResultLine(std::string_view line) {
  auto object = ParseJsonLine(line);
  if (!object.ok()) return object.status();
  const JsonObject& o = *object;
  BenchResult r;
  absl::Status st;
  auto str = [&](std::string_view key, std::string& out) {
    auto v = GetString(o, key);
    if (v.ok()) {
      out = *v;
    } else if (st.ok()) {
      st = v.status();
    }
  };
  auto num = [&](std::string_view key, auto& out) {
    auto v = GetNumber(o, key);
    if (v.ok()) {
      out = static_cast<std::remove_reference_t<decltype(out)>>(*v);
    } else if (st.ok()) {
      st = v.status();
    }
  };
  str("impl", r.impl);
  str("op", r.op);
  str("algo", r.algo);
  num("ranks", r.ranks);
  num("bytes", r.bytes);
  num("requested_bytes", r.requested_bytes);
  str("dtype", r.dtype);
  num("iters", r.iters);
  // time_us is null for a row that was not measured.
  if (auto it = o.find("time_us");
      it != o.end() && std::holds_alternative<std::nullptr_t>(it->second)) {
    r.time_us = std::numeric_limits<double>::quiet_NaN();
  } else {
    num("time_us", r.time_us);
  }
  num("algbw_gbps", r.algbw_gbps);
  num("busbw_gbps", r.busbw_gbps);
  str("check", r.check);
  if (o.count("wait_us")) num("wait_us", r.wait_us);
  if (o.count("detail")) str("detail", r.detail);
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

}  // namespace herd::bench
