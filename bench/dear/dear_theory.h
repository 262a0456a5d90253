#pragma once
// The DeAR paper's iteration-time model (section VI-E, eq. 6-9): what perfect overlap of
// communication with computation allows.
//
//   t_DeAR     = max(t_ff, t_ag) + max(t_bp, t_rs)                      (7)
//   t_baseline = t_ff + max(t_bp, t_ar)          (WFBP: overlap in backward only)   (8)
//   S_max      = P (t_ff + t_bp) / (t_ff + t_bp + t_ar - min(t_rs, t_bp) - min(t_ag, t_ff))  (6)
//   with t_ar = t_rs + t_ag, t_bp = 2 t_ff, t_rs = t_ag:
//   t_baseline - t_DeAR = 0 (t_ag <= t_ff); t_ag - t_ff (t_ff < t_ag <= 2 t_ff); t_ff (else)  (9)
//
// The text of (9) lost its formula; it is (8) minus (7) under its two assumptions, which the
// three cases above reproduce (checked in dear_theory_test.cc). Eq. 6 is the speedup over one
// worker when both passes hide as much communication as they can; S_max / P is the best
// scaling efficiency.

namespace herd::emulator {

struct PhaseTimes {
  double ff = 0;  // forward computation
  double bp = 0;  // backward computation
  double rs = 0;  // reduce-scatter communication of all gradients
  double ag = 0;  // all-gather communication of all gradients
  double ar = 0;  // all-reduce communication; rs + ag in the paper's model (decoupling is
                  // free), measured on its own by the replay
};

double DearIterationTime(const PhaseTimes& t);        // eq. 7
double BaselineIterationTime(const PhaseTimes& t);    // eq. 8
double MaxSpeedup(const PhaseTimes& t, int workers);  // eq. 6
// Eq. 9 as written (its assumptions taken from t.ff and t.ag alone).
double Eq9Improvement(const PhaseTimes& t);

// Communication time of a ring over links of `bits_per_s`, alpha = 0 (eq. 3-5): each half
// moves (P-1)/P of the `bytes`.
double RingHalfSeconds(double bytes, int workers, double bits_per_s);

}  // namespace herd::emulator
