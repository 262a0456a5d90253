#include "bench/report.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "bench/sizes.h"

namespace herd::bench {

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

}  // namespace herd::bench
