#include "bench/dear/dear_theory.h"

#include <algorithm>

namespace herd::emulator {

double DearIterationTime(const PhaseTimes& t) {
  return std::max(t.ff, t.ag) + std::max(t.bp, t.rs);
}

double BaselineIterationTime(const PhaseTimes& t) { return t.ff + std::max(t.bp, t.ar); }

double MaxSpeedup(const PhaseTimes& t, int workers) {
  const double compute = t.ff + t.bp;
  const double denom = compute + t.ar - std::min(t.rs, t.bp) - std::min(t.ag, t.ff);
  return denom > 0 ? workers * compute / denom : workers;
}

double Eq9Improvement(const PhaseTimes& t) {
  if (t.ag <= t.ff) return 0.0;
  if (t.ag <= 2 * t.ff) return t.ag - t.ff;
  return t.ff;
}

double RingHalfSeconds(double bytes, int workers, double bits_per_s) {
  if (workers <= 1) return 0.0;
  return (workers - 1.0) / workers * bytes * 8.0 / bits_per_s;
}

}  // namespace herd::emulator
