#include "bench/dear/replay.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "algorithms/collectives/allreduce.h"
#include "bench/dear/pacer.h"
#include "bench/sizes.h"
#include "common/status.h"
#include "worker/executor.h"

namespace herd::emulator {
namespace {

using Seconds = std::chrono::duration<double>;

double Since(Clock::time_point t) { return Seconds(Clock::now() - t).count(); }

// "... tuner settled on 1234 bytes after 7 trials": the FusionTuning summary in Describe().
bool ParseSettled(const std::string& describe, size_t* threshold, int* trials) {
  const size_t at = describe.find("settled on ");
  if (at == std::string::npos) return false;
  unsigned long long bytes = 0;
  int n = 0;
  if (std::sscanf(describe.c_str() + at, "settled on %llu bytes after %d trials", &bytes, &n) !=
      2) {
    return false;
  }
  *threshold = static_cast<size_t>(bytes);
  *trials = n;
  return true;
}

class Replayer {
 public:
  Replayer(const ModelProfile& model, bool compute, worker::Executor& ex)
      : model_(model), compute_(compute), ex_(ex) {
    size_t largest = 0;
    for (const LayerProfile& l : model.layers) {
      for (size_t c : l.tensor_counts) largest = std::max(largest, c);
    }
    // One gradient buffer serves every tensor: the executor copies it into its bucket.
    grad_.assign(largest, 1e-6f);
  }

  struct Phases {
    double forward = 0, backward = 0, end = 0;
  };

  absl::Status Iteration(int64_t i, Phases* phases) {
    HERD_RETURN_IF_ERROR(ex_.BeginIteration(i));
    pacer_.Restart();
    const auto t0 = Clock::now();
    int tensor = 0;
    for (const LayerProfile& l : model_.layers) {
      for (size_t k = 0; k < l.tensor_counts.size(); ++k) {
        const auto call = Clock::now();
        HERD_RETURN_IF_ERROR(ex_.BeforeForward(tensor++));
        pacer_.AfterExecutorCall(call);
      }
      if (compute_) pacer_.Spend(l.forward_s);
    }
    const auto t1 = Clock::now();
    for (auto l = model_.layers.rbegin(); l != model_.layers.rend(); ++l) {
      if (compute_) pacer_.Spend(l->backward_s);
      for (size_t k = l->tensor_counts.size(); k-- > 0;) {
        --tensor;
        const auto call = Clock::now();
        HERD_RETURN_IF_ERROR(
            ex_.GradientReady(tensor, std::span<const float>(grad_.data(), l->tensor_counts[k])));
        pacer_.AfterExecutorCall(call);
      }
    }
    const auto t2 = Clock::now();
    HERD_RETURN_IF_ERROR(ex_.EndBackward());
    if (phases != nullptr) {
      phases->forward += Seconds(t1 - t0).count();
      phases->backward += Seconds(t2 - t1).count();
      phases->end += Since(t2);
    }
    return absl::OkStatus();
  }

 private:
  const ModelProfile& model_;
  const bool compute_;
  worker::Executor& ex_;
  std::vector<float> grad_;
  Pacer pacer_;
};

absl::Status MaxOverRanks(transport::Communicator& comm, std::vector<double>& values,
                          std::chrono::milliseconds timeout) {
  collectives::AllReduceOptions m;
  m.comm = &comm;
  m.dtype = DType::kFloat64;
  m.op = ReduceOp::kMax;
  m.data = values.data();
  m.count = values.size();
  m.tag = 7;
  m.timeout = timeout;
  return collectives::RingAllReduce(m);
}

// The executor context shared by every configuration: the model's tensors over `params`.
worker::ExecutorContext BaseContext(transport::Communicator& comm, const ReplayOptions& o,
                                    std::vector<std::vector<float>>& params) {
  worker::ExecutorContext ctx;
  ctx.plan.set_world_size(comm.size());
  ctx.rank = comm.rank();
  ctx.comm = &comm;
  ctx.optimizer.learning_rate = 1e-3;
  ctx.fusion.tune_trials = o.tune_trials;
  ctx.fusion.iterations_per_trial = o.iterations_per_trial;
  ctx.fusion.tune_min_bytes = o.tune_min_bytes;
  ctx.fusion.tune_max_bytes = o.tune_max_bytes;
  ctx.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(o.timeout);
  params.clear();
  for (const LayerProfile& l : o.model.layers) {
    for (size_t k = 0; k < l.tensor_counts.size(); ++k) {
      params.emplace_back(l.tensor_counts[k], 0.5f);
      ctx.tensors.push_back({l.tensor_names[k], params.back().data(), l.tensor_counts[k]});
    }
  }
  return ctx;
}

// Runs the online tuner of a dear executor until it settles; fills the tuner fields of `r`.
absl::Status Tune(worker::ExecutorContext ctx, const ReplayOptions& o, ReplayResult& r) {
  ctx.plan.mutable_mode()->set_mode("dear");
  ctx.fusion.tune = true;
  HERD_ASSIGN_OR_RETURN(std::unique_ptr<worker::Executor> ex, worker::MakeExecutor(ctx));
  Replayer replayer(o.model, /*compute=*/true, *ex);
  // Every trial is a warm-up iteration plus iterations_per_trial measured ones. The tuner
  // decides at iteration boundaries on a value all ranks agreed on, so every rank sees it
  // settle at the same iteration and leaves the loop there.
  const int cap = (o.tune_trials + 1) * (o.iterations_per_trial + 1) + 2;
  const auto start = Clock::now();
  int64_t it = 0;
  for (; it < cap && !ParseSettled(ex->Describe(), &r.threshold, &r.tuner_trials); ++it) {
    HERD_RETURN_IF_ERROR(replayer.Iteration(it, nullptr));
  }
  r.tuning_s = Since(start);
  r.tuning_iterations = static_cast<int>(it);
  if (!ParseSettled(ex->Describe(), &r.threshold, &r.tuner_trials)) {
    return absl::InternalError("replay: the tuner did not settle: " + ex->Describe());
  }
  return ex->Flush();
}

// One round of one configuration: {iteration, forward, backward, end, exposed} means.
absl::StatusOr<std::vector<double>> Measure(worker::ExecutorContext ctx, const ReplayOptions& o,
                                            const ReplayConfig& c, size_t threshold,
                                            std::string* describe) {
  ctx.plan.mutable_mode()->set_mode(c.mode);
  ctx.fusion.threshold_bytes = threshold;
  HERD_ASSIGN_OR_RETURN(std::unique_ptr<worker::Executor> ex, worker::MakeExecutor(ctx));
  Replayer replayer(o.model, c.compute, *ex);
  int64_t it = 0;
  for (int w = 0; w < o.warmup; ++w, ++it) HERD_RETURN_IF_ERROR(replayer.Iteration(it, nullptr));
  ex->TakeExposedSeconds();
  Replayer::Phases phases;
  // In steady state each measured iteration holds one full cycle: dear's forward waits for
  // the all-gathers the previous iteration started, and the all-gathers the last measured one
  // starts are waited for by nobody measured (Flush below).
  const auto start = Clock::now();
  for (int k = 0; k < o.iters; ++k, ++it) HERD_RETURN_IF_ERROR(replayer.Iteration(it, &phases));
  std::vector<double> v = {Since(start) / o.iters, phases.forward / o.iters,
                           phases.backward / o.iters, phases.end / o.iters,
                           ex->TakeExposedSeconds() / o.iters};
  HERD_RETURN_IF_ERROR(ex->Flush());
  *describe = ex->Describe();
  HERD_RETURN_IF_ERROR(MaxOverRanks(*ctx.comm, v, ctx.timeout));
  return v;
}

}  // namespace

absl::StatusOr<ReplayConfig> ParseReplayConfig(std::string_view text) {
  std::vector<std::string> parts = absl::StrSplit(absl::string_view(text.data(), text.size()), ':');
  ReplayConfig c;
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrFormat("'%s' is not a replay configuration (MODE:THRESHOLD[:comm] or dear:tune)",
                        std::string(text)));
  };
  if (parts.size() < 2 || parts.size() > 3 || parts[0].empty()) return bad();
  c.mode = parts[0];
  if (parts[1] == "tune") {
    if (c.mode != "dear" || parts.size() != 2) return bad();
    c.tune = true;
  } else {
    auto t = bench::ParseByteSize(parts[1]);
    if (!t.ok()) return bad();
    c.threshold_bytes = *t;
  }
  if (parts.size() == 3) {
    if (parts[2] != "comm") return bad();
    c.compute = false;
  }
  return c;
}

std::string FormatReplayConfig(const ReplayConfig& c) {
  if (c.tune) return c.mode + ":tune";
  return absl::StrFormat("%s:%s%s", c.mode, bench::FormatByteSize(c.threshold_bytes),
                         c.compute ? "" : ":comm");
}

absl::StatusOr<std::vector<ReplayResult>> RunReplay(transport::Communicator& comm,
                                                    const ReplayOptions& o) {
  if (o.iters < 1 || o.warmup < 0 || o.rounds < 1 || o.configs.empty()) {
    return absl::InvalidArgumentError(
        "replay: need iters >= 1, warmup >= 0, rounds >= 1 and a configuration");
  }
  std::vector<std::vector<float>> params;
  const worker::ExecutorContext ctx = BaseContext(comm, o, params);
  std::vector<ReplayResult> results(o.configs.size());
  for (size_t i = 0; i < o.configs.size(); ++i) {
    results[i].config = FormatReplayConfig(o.configs[i]);
    results[i].threshold = o.configs[i].threshold_bytes;
    if (o.configs[i].tune) {
      HERD_RETURN_IF_ERROR(Tune(ctx, o, results[i]));
      if (o.progress) {
        o.progress(absl::StrFormat("tuner settled on %d bytes after %d trials (%.1f s)",
                                   results[i].threshold, results[i].tuner_trials,
                                   results[i].tuning_s));
      }
    }
  }
  std::vector<std::vector<std::vector<double>>> rounds(o.configs.size());
  for (int round = 0; round < o.rounds; ++round) {
    for (size_t i = 0; i < o.configs.size(); ++i) {
      HERD_ASSIGN_OR_RETURN(
          std::vector<double> v,
          Measure(ctx, o, o.configs[i], results[i].threshold, &results[i].describe));
      if (o.progress) {
        o.progress(
            absl::StrFormat("round %d %s: %.1f ms", round + 1, results[i].config, v[0] * 1e3));
      }
      rounds[i].push_back(std::move(v));
    }
  }
  for (size_t i = 0; i < o.configs.size(); ++i) {
    for (const std::vector<double>& v : rounds[i]) results[i].round_iter_s.push_back(v[0]);
    // The round with the median iteration time, phases and all (they belong together).
    auto& r = rounds[i];
    std::sort(r.begin(), r.end(), [](const auto& a, const auto& b) { return a[0] < b[0]; });
    const std::vector<double>& m = r[r.size() / 2];
    results[i].iter_s = m[0];
    results[i].forward_s = m[1];
    results[i].backward_s = m[2];
    results[i].end_s = m[3];
    results[i].exposed_s = m[4];
  }
  return results;
}

const json::Field<ReplayResult> kReplayFields[] = {
    {"config", &ReplayResult::config},
    {"iter_s", &ReplayResult::iter_s},
    {"forward_s", &ReplayResult::forward_s},
    {"backward_s", &ReplayResult::backward_s},
    {"end_s", &ReplayResult::end_s},
    {"exposed_s", &ReplayResult::exposed_s},
    {"threshold", &ReplayResult::threshold},
    {"tuner_trials", &ReplayResult::tuner_trials},
    {"tuning_iterations", &ReplayResult::tuning_iterations},
    {"tuning_s", &ReplayResult::tuning_s},
    {"describe", &ReplayResult::describe},
    {"round_iter_s", &ReplayResult::round_iter_s}};

json::Object ToJson(const ReplayResult& r) { return json::ToObject(r, kReplayFields); }

absl::StatusOr<ReplayResult> ReplayResultFromJson(const json::Object& line) {
  ReplayResult r;
  HERD_RETURN_IF_ERROR(json::FromObject(line, kReplayFields, r));
  return r;
}

}  // namespace herd::emulator
