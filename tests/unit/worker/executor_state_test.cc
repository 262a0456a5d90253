// Every collective executor's ExportState / ImportState over threads-as-ranks:
//  - a run stopped after N iterations, its state exported and imported into fresh executors
//    (at the same worker count) continues bit for bit as the run that never stopped, and the
//    imported state exports back unchanged;
//  - at another worker count the rules hold: residuals by their mean (mass conserved), clps's
//    reducer residual by its sum, decentralized models and slots averaged;
//  - a mode switch in memory carries momentum and residuals to the next mode.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/splitmix.h"
#include "common/status.h"
#include "tests/support/spawn.h"
#include "worker/executor.h"
#include "worker/executor_state.h"

namespace herd::worker {
namespace {

using checkpoint::MemoryStateSource;
using checkpoint::ProcessState;

const std::vector<size_t> kCounts = {5, 100, 1, 33, 300, 7};

struct Training {
  std::string mode;
  int ranks = 3;
  optim::OptimizerConfig::Kind optimizer = optim::OptimizerConfig::Kind::kMomentum;
  int first = 5;  // iterations before the stop
  int then = 4;   // after it
  int teams = 0;
  bool tune = false;
  bool exact_grads = false;  // small halves: sums exact in any order
};

// A gradient that differs per rank, iteration, tensor and element. Not exact in general, so a
// state that is not carried (or carried approximately) shows in the bits.
float Grad(const Training& run, int r, int64_t it, int t, size_t i) {
  if (run.exact_grads) {
    return static_cast<float>(static_cast<int>((r + 1) * (it + 2) + t * 3 + i % 11) % 17) * 0.5f;
  }
  const uint64_t h = Mix64((static_cast<uint64_t>(r) << 48) ^ (static_cast<uint64_t>(it) << 32) ^
                           (static_cast<uint64_t>(t) << 24) ^ i);
  return static_cast<float>(static_cast<int64_t>(h % 20001) - 10000) / 7919.0f;
}

struct Model {
  std::vector<std::vector<float>> params;
  std::vector<ModelTensor> tensors;

  Model() {
    for (size_t t = 0; t < kCounts.size(); ++t) {
      params.emplace_back(kCounts[t]);
      for (size_t i = 0; i < kCounts[t]; ++i) params[t][i] = 0.25f * static_cast<float>(t + i % 7);
    }
    for (size_t t = 0; t < kCounts.size(); ++t) {
      tensors.push_back({absl::StrFormat("t%d", t), params[t].data(), kCounts[t]});
    }
  }
  Model(const Model&) = delete;
};

ExecutorContext Context(const Training& run, const std::string& mode, transport::Communicator& comm,
                        Model& m, int64_t first_iteration) {
  ExecutorContext ctx;
  ctx.plan.mutable_mode()->set_mode(mode);
  ctx.plan.mutable_mode()->set_density(0.05);
  if (run.teams > 0) ctx.plan.mutable_mode()->set_teams(run.teams);
  ctx.plan.set_world_size(comm.size());
  ctx.plan.set_seed(11);
  ctx.rank = comm.rank();
  ctx.comm = &comm;
  ctx.tensors = m.tensors;
  ctx.optimizer.kind = run.optimizer;
  ctx.optimizer.learning_rate = 0.125;
  ctx.fusion.threshold_bytes = 512;
  ctx.fusion.tune = run.tune;
  ctx.fusion.tune_trials = 4;
  ctx.fusion.iterations_per_trial = 1;
  ctx.fusion.tune_min_bytes = 16;
  ctx.fusion.tune_max_bytes = 4096;
  ctx.timeout = std::chrono::seconds(30);
  ctx.first_iteration = first_iteration;
  return ctx;
}

absl::Status Drive(const Training& run, Executor& ex, int rank, int64_t from, int64_t to) {
  const int T = static_cast<int>(kCounts.size());
  for (int64_t it = from; it < to; ++it) {
    HERD_RETURN_IF_ERROR(ex.BeginIteration(it));
    for (int t = 0; t < T; ++t) HERD_RETURN_IF_ERROR(ex.BeforeForward(t));
    for (int t = T - 1; t >= 0; --t) {
      std::vector<float> g(kCounts[t]);
      for (size_t i = 0; i < g.size(); ++i) g[i] = Grad(run, rank, it, t, i);
      HERD_RETURN_IF_ERROR(ex.GradientReady(t, g));
    }
    HERD_RETURN_IF_ERROR(ex.EndBackward());
  }
  return ex.Flush();
}

// Everything one rank ends with: its parameters and its exported state.
struct Outcome {
  std::vector<std::vector<float>> params;
  ProcessState state;
};

// The per-rank outcomes of threads-as-ranks, collected under a lock.
class Outcomes {
 public:
  explicit Outcomes(int ranks) : by_rank_(ranks) {}
  void Set(int rank, Outcome o) {
    std::lock_guard<std::mutex> lock(mu_);
    by_rank_[rank] = std::move(o);
  }
  Outcome& operator[](int rank) { return by_rank_[rank]; }
  std::vector<ProcessState> States() const {
    std::vector<ProcessState> out;
    for (const Outcome& o : by_rank_) out.push_back(o.state);
    return out;
  }

 private:
  std::mutex mu_;
  std::vector<Outcome> by_rank_;
};

absl::StatusOr<ProcessState> Export(Executor& ex, int rank, const Model& m) {
  ProcessState s;
  s.process = checkpoint::WorkerProcess(rank);
  HERD_RETURN_IF_ERROR(ex.ExportState(s));
  ExportParams(s, m.tensors);
  return s;
}

std::string Describe(const ProcessState& s) {
  std::string out;
  for (const auto& e : s.extents) {
    out += absl::StrFormat("%s[%d+%d] ", e.name, e.offset, e.count());
  }
  for (const auto& [k, v] : s.values) out += absl::StrFormat("%s=%s ", k, v.substr(0, 40));
  return out;
}

// Bitwise equality of two exported states (extent order included: export is deterministic).
void ExpectSameState(const ProcessState& a, const ProcessState& b, const std::string& what) {
  ASSERT_EQ(a.extents.size(), b.extents.size()) << what << "\n"
                                                << Describe(a) << "\n"
                                                << Describe(b);
  for (size_t i = 0; i < a.extents.size(); ++i) {
    EXPECT_EQ(a.extents[i].name, b.extents[i].name) << what;
    EXPECT_EQ(a.extents[i].offset, b.extents[i].offset) << what;
    EXPECT_TRUE(a.extents[i].bytes == b.extents[i].bytes)
        << what << ": extent " << a.extents[i].name << " differs";
  }
  EXPECT_EQ(a.values, b.values) << what;
}

class RoundTripTest : public ::testing::TestWithParam<Training> {};

// Training A: first + then iterations in one executor. Training B: first iterations, export, a
// fresh model and executor that import, then the rest. Same bits at the end, and the import exports
// back what was exported.
TEST_P(RoundTripTest, ResumeContinuesBitForBit) {
  const Training run = GetParam();
  Outcomes whole(run.ranks), resumed(run.ranks);
  std::vector<ProcessState> stopped(run.ranks);
  std::mutex mu;
  auto st = testing::FirstError(testing::SpawnRanks(run.ranks, [&](transport::Communicator& comm) {
    Model m;
    HERD_ASSIGN_OR_RETURN(auto ex, MakeExecutor(Context(run, run.mode, comm, m, 0)));
    HERD_RETURN_IF_ERROR(Drive(run, *ex, comm.rank(), 0, run.first + run.then));
    HERD_ASSIGN_OR_RETURN(ProcessState s, Export(*ex, comm.rank(), m));
    whole.Set(comm.rank(), Outcome{m.params, std::move(s)});
    return absl::OkStatus();
  }));
  ASSERT_TRUE(st.ok()) << st;
  st = testing::FirstError(testing::SpawnRanks(run.ranks, [&](transport::Communicator& comm) {
    Model m;
    HERD_ASSIGN_OR_RETURN(auto ex, MakeExecutor(Context(run, run.mode, comm, m, 0)));
    HERD_RETURN_IF_ERROR(Drive(run, *ex, comm.rank(), 0, run.first));
    HERD_ASSIGN_OR_RETURN(ProcessState s, Export(*ex, comm.rank(), m));
    std::lock_guard<std::mutex> lock(mu);
    stopped[comm.rank()] = std::move(s);
    return absl::OkStatus();
  }));
  ASSERT_TRUE(st.ok()) << st;
  const MemoryStateSource source(stopped, run.ranks);
  st = testing::FirstError(testing::SpawnRanks(run.ranks, [&](transport::Communicator& comm) {
    Model m;
    const ImportWhere where{comm.rank(), comm.size()};
    // The parameters first: an executor may exchange them when it starts (decentralized_lp).
    HERD_RETURN_IF_ERROR(ImportParams(source, where, m.tensors));
    HERD_ASSIGN_OR_RETURN(auto ex, MakeExecutor(Context(run, run.mode, comm, m, run.first)));
    HERD_RETURN_IF_ERROR(ex->ImportState(source));
    HERD_ASSIGN_OR_RETURN(ProcessState again, Export(*ex, comm.rank(), m));
    HERD_RETURN_IF_ERROR(Drive(run, *ex, comm.rank(), run.first, run.first + run.then));
    HERD_ASSIGN_OR_RETURN(ProcessState s, Export(*ex, comm.rank(), m));
    resumed.Set(comm.rank(), Outcome{m.params, std::move(s)});
    std::lock_guard<std::mutex> lock(mu);
    // Kept for the comparison below (the thread cannot use gtest's ASSERTs).
    stopped.push_back(std::move(again));
    return absl::OkStatus();
  }));
  ASSERT_TRUE(st.ok()) << st;
  // Every rank's re-export equals some rank's export (threads finish in any order).
  for (int i = 0; i < run.ranks; ++i) {
    const ProcessState& again = stopped[run.ranks + i];
    const int r = again.process.back() - '0';
    ExpectSameState(stopped[r], again, "import then export, " + again.process);
  }
  if (run.tune) return;  // the tuner measures time: two runs try other thresholds
  for (int r = 0; r < run.ranks; ++r) {
    for (size_t t = 0; t < kCounts.size(); ++t) {
      ASSERT_EQ(0, std::memcmp(whole[r].params[t].data(), resumed[r].params[t].data(),
                               kCounts[t] * sizeof(float)))
          << "rank " << r << " tensor " << t << " after the resume differs from the run that "
          << "never stopped";
    }
    ExpectSameState(whole[r].state, resumed[r].state, absl::StrFormat("rank %d at the end", r));
  }
}

std::string RunName(const ::testing::TestParamInfo<Training>& info) {
  const Training& r = info.param;
  return absl::StrFormat("%s_P%d_%s%s", r.mode, r.ranks, optim::OptimizerName(r.optimizer),
                         r.tune ? "_tuned" : "");
}

using Kind = optim::OptimizerConfig::Kind;
INSTANTIATE_TEST_SUITE_P(
    Modes, RoundTripTest,
    ::testing::Values(Training{"allreduce", 3, Kind::kMomentum}, Training{"lp", 2, Kind::kAdam},
                      Training{"dear", 3, Kind::kAdam},
                      Training{"dear", 2, Kind::kMomentum, 6, 4, 0, true},
                      // 3 teams of 1: B-SAG; 48 + 6 iterations cross the warm-up's first stage.
                      Training{"sparse", 3, Kind::kMomentum, 48, 6, 3},
                      Training{"topk_allgather", 3, Kind::kSgd, 48, 6},
                      Training{"clps", 3, Kind::kMomentum},
                      Training{"decentralized", 4, Kind::kMomentum},
                      Training{"decentralized_lp", 3, Kind::kAdam}),
    RunName);

// The states of `run` at `P` ranks after `iterations`.
std::vector<ProcessState> StatesAfter(const Training& run, int P, int iterations) {
  std::vector<ProcessState> states(P);
  std::mutex mu;
  auto st = testing::FirstError(testing::SpawnRanks(P, [&](transport::Communicator& comm) {
    Model m;
    HERD_ASSIGN_OR_RETURN(auto ex, MakeExecutor(Context(run, run.mode, comm, m, 0)));
    HERD_RETURN_IF_ERROR(Drive(run, *ex, comm.rank(), 0, iterations));
    HERD_ASSIGN_OR_RETURN(ProcessState s, Export(*ex, comm.rank(), m));
    std::lock_guard<std::mutex> lock(mu);
    states[comm.rank()] = std::move(s);
    return absl::OkStatus();
  }));
  EXPECT_TRUE(st.ok()) << st;
  return states;
}

// What each of `P` new ranks exports right after importing `from`.
std::vector<ProcessState> ImportedAt(const Training& run, const MemoryStateSource& from, int P) {
  std::vector<ProcessState> states(P);
  std::mutex mu;
  auto st = testing::FirstError(testing::SpawnRanks(P, [&](transport::Communicator& comm) {
    Model m;
    HERD_RETURN_IF_ERROR(ImportParams(from, {comm.rank(), P}, m.tensors));
    HERD_ASSIGN_OR_RETURN(auto ex, MakeExecutor(Context(run, run.mode, comm, m, 10)));
    HERD_RETURN_IF_ERROR(ex->ImportState(from));
    HERD_ASSIGN_OR_RETURN(ProcessState s, Export(*ex, comm.rank(), m));
    std::lock_guard<std::mutex> lock(mu);
    states[comm.rank()] = std::move(s);
    return absl::OkStatus();
  }));
  EXPECT_TRUE(st.ok()) << st;
  return states;
}

std::vector<float> Values(const ProcessState& s, const std::string& name) {
  for (const auto& e : s.extents) {
    if (e.name == name) {
      std::vector<float> v(e.count());
      std::memcpy(v.data(), e.bytes.data(), e.bytes.size());
      return v;
    }
  }
  ADD_FAILURE() << s.process << " exported no " << name;
  return {};
}

// Sum over the states of `name`, element by element, in rank order.
std::vector<float> Sum(const std::vector<ProcessState>& states, const std::string& name) {
  std::vector<float> sum;
  for (const ProcessState& s : states) {
    std::vector<float> v = Values(s, name);
    sum.resize(v.size(), 0.0f);
    for (size_t i = 0; i < v.size(); ++i) sum[i] += v[i];
  }
  return sum;
}

double Total(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += x;
  return s;
}

// Residuals at 4 workers resumed at 2 and 3: each new worker holds the mean, so the residual
// mass that enters the averaged update (sum / P) is the same.
TEST(ReshardTest, ResidualMeanConservesTheAveragedMass) {
  for (const std::string mode : {"sparse", "topk_allgather"}) {
    const Training run{mode, 4, Kind::kMomentum, 3, 0};
    const std::vector<ProcessState> old = StatesAfter(run, 4, 3);
    const MemoryStateSource source(old, 4);
    for (int P : {2, 3}) {
      const std::vector<ProcessState> now = ImportedAt(run, source, P);
      double mass = 0;
      for (size_t t = 0; t < kCounts.size(); ++t) {
        const std::string name = absl::StrFormat("residual/t%d", t);
        const std::vector<float> old_sum = Sum(old, name), new_sum = Sum(now, name);
        mass += std::abs(Total(old_sum));
        for (size_t i = 0; i < old_sum.size(); ++i) {
          EXPECT_NEAR(old_sum[i] / 4, new_sum[i] / P, 1e-5)
              << mode << " " << name << "[" << i << "] at " << P << " workers";
        }
        // Replicated state (momentum) comes as it was.
        const std::string momentum = absl::StrFormat("momentum/t%d", t);
        EXPECT_EQ(Values(old[0], momentum), Values(now[P - 1], momentum));
      }
      EXPECT_GT(mass, 0) << mode << ": no residual to carry";
    }
  }
}

// clps's reducer residual lives with the chunk's owner: at another worker count every rank
// reads the sum (each element's one owner's value) and keeps its new chunks of it, so each
// element has again exactly one owner; its sender residual is the mean.
TEST(ReshardTest, ClpsReducerResidualIsSummedSenderResidualAveraged) {
  const Training run{"clps", 4, Kind::kSgd, 3, 0};
  const std::vector<ProcessState> old = StatesAfter(run, 4, 3);
  const MemoryStateSource source(old, 4);
  const std::vector<ProcessState> now = ImportedAt(run, source, 3);
  for (size_t t = 0; t < kCounts.size(); ++t) {
    const std::string reducer = absl::StrFormat("reducer_residual/t%d", t);
    const std::vector<float> owners = Sum(old, reducer);
    EXPECT_EQ(owners, Sum(now, reducer)) << reducer;
    const std::string sender = absl::StrFormat("residual/t%d", t);
    const std::vector<float> old_sum = Sum(old, sender), new_sum = Sum(now, sender);
    for (size_t i = 0; i < old_sum.size(); ++i) {
      EXPECT_NEAR(old_sum[i] / 4, new_sum[i] / 3, 1e-5) << sender << "[" << i << "]";
    }
  }
}

// An elastic job's survivors (old ranks 0, 2 and 3 of 4; rank 1 died) each import only their
// own commit into the executor of three: an element keeps its reducer residual when its old
// owner survived and owns it still, and starts at zero otherwise; none is held twice.
TEST(ReshardTest, ClpsSurvivorsKeepTheReducerResidualOfTheChunksTheyStillOwn) {
  const Training run{"clps", 4, Kind::kSgd, 3, 0};
  const std::vector<ProcessState> old = StatesAfter(run, 4, 3);
  const std::vector<int> survivors = {0, 2, 3};
  std::vector<ProcessState> now(3);
  std::mutex mu;
  auto st = testing::FirstError(testing::SpawnRanks(3, [&](transport::Communicator& comm) {
    Model m;
    HERD_ASSIGN_OR_RETURN(auto ex, MakeExecutor(Context(run, run.mode, comm, m, 10)));
    ProcessState own = old[static_cast<size_t>(survivors[static_cast<size_t>(comm.rank())])];
    own.process = checkpoint::WorkerProcess(comm.rank());
    HERD_RETURN_IF_ERROR(GiveExecutorState(*ex, std::move(own), comm.size()));
    HERD_ASSIGN_OR_RETURN(ProcessState s, Export(*ex, comm.rank(), m));
    std::lock_guard<std::mutex> lock(mu);
    now[static_cast<size_t>(comm.rank())] = std::move(s);
    return absl::OkStatus();
  }));
  ASSERT_TRUE(st.ok()) << st;
  int kept = 0, dropped = 0;
  for (size_t t = 0; t < kCounts.size(); ++t) {
    const std::string reducer = absl::StrFormat("reducer_residual/t%d", t);
    const std::vector<float> owners = Sum(old, reducer), held = Sum(now, reducer);
    for (size_t i = 0; i < owners.size(); ++i) {
      if (owners[i] == 0.0f) continue;
      if (held[i] == 0.0f) {
        ++dropped;
      } else {
        EXPECT_EQ(held[i], owners[i]) << reducer << "[" << i << "]";
        ++kept;
      }
    }
  }
  // A run of three keeps its reducer residual in each rank's chunks (an element compressed
  // exactly keeps 0): a survivor holds none where another rank of three keeps one.
  const std::vector<ProcessState> three = StatesAfter(run, 3, 3);
  for (size_t r = 0; r < 3; ++r) {
    for (size_t q = 0; q < 3; ++q) {
      if (q == r) continue;
      for (size_t t = 0; t < kCounts.size(); ++t) {
        const std::string reducer = absl::StrFormat("reducer_residual/t%d", t);
        const std::vector<float> held = Values(now[r], reducer), other = Values(three[q], reducer);
        for (size_t i = 0; i < held.size(); ++i) {
          EXPECT_FALSE(held[i] != 0.0f && other[i] != 0.0f)
              << "rank " << r << " holds " << reducer << "[" << i << "], which rank " << q
              << " reduces at three workers";
        }
      }
    }
  }
  EXPECT_GT(kept, 0) << "no survivor kept the residual of a chunk it still owns";
  EXPECT_GT(dropped, 0) << "the chunks' owners did not change";
}

// Decentralized models differ per rank: at another worker count every new rank starts from
// the old ranks' average model, and the same for the momentum.
TEST(ReshardTest, DecentralizedModelsAreAveraged) {
  for (const std::string mode : {"decentralized", "decentralized_lp"}) {
    const Training run{mode, 4, Kind::kMomentum, 3, 0};
    const std::vector<ProcessState> old = StatesAfter(run, 4, 3);
    const MemoryStateSource source(old, 4);
    const std::vector<ProcessState> now = ImportedAt(run, source, 2);
    for (size_t t = 0; t < kCounts.size(); ++t) {
      for (const char* kind : {"param", "momentum"}) {
        const std::string name = absl::StrFormat("%s/t%d", kind, t);
        ASSERT_NE(Values(old[0], name), Values(old[1], name))
            << "the ranks' " << name << " did not diverge";
        std::vector<float> mean = Sum(old, name);
        for (float& v : mean) v /= 4.0f;
        for (const ProcessState& s : now) EXPECT_EQ(mean, Values(s, name)) << mode << " " << name;
      }
    }
  }
}

// decentralized_lp in an elastic job: the survivors (old ranks 0, 2 and 3 of 4) roll back to
// their own commits and build the ring of three (membership generation 1), whose ranks are
// their positions. Their replicas are of the new ring: each is bitwise its owner's model (the
// models differ per rank, so a replica imported under the old ring's names would not be).
TEST(ReshardTest, DecentralizedLpSurvivorsStartTheReplicasOfTheirNewNeighbours) {
  const Training run{"decentralized_lp", 4, Kind::kMomentum, 3, 0};
  const std::vector<ProcessState> old = StatesAfter(run, 4, 3);
  const std::vector<int> survivors = {0, 2, 3};
  std::vector<ProcessState> now(3);
  std::mutex mu;
  auto st = testing::FirstError(testing::SpawnRanks(3, [&](transport::Communicator& comm) {
    Model m;
    ProcessState own = old[static_cast<size_t>(survivors[static_cast<size_t>(comm.rank())])];
    {
      ProcessState params = own;
      params.process = checkpoint::WorkerProcess(0);
      std::vector<ProcessState> one;
      one.push_back(std::move(params));
      HERD_RETURN_IF_ERROR(ImportParams(MemoryStateSource(std::move(one), 1), {0, 1}, m.tensors));
    }
    ExecutorContext ctx = Context(run, run.mode, comm, m, 10);
    ctx.plan.set_membership_generation(1);
    HERD_ASSIGN_OR_RETURN(auto ex, MakeExecutor(ctx));
    own.process = checkpoint::WorkerProcess(comm.rank());
    HERD_RETURN_IF_ERROR(GiveExecutorState(*ex, std::move(own), comm.size()));
    HERD_ASSIGN_OR_RETURN(ProcessState s, Export(*ex, comm.rank(), m));
    std::lock_guard<std::mutex> lock(mu);
    now[static_cast<size_t>(comm.rank())] = std::move(s);
    return absl::OkStatus();
  }));
  ASSERT_TRUE(st.ok()) << st;
  for (int r = 0; r < 3; ++r) {
    for (size_t t = 0; t < kCounts.size(); ++t) {
      const std::string param = absl::StrFormat("param/t%d", t);
      EXPECT_EQ(Values(now[r], param), Values(old[survivors[r]], param)) << "rolled back";
      for (int q : {(r + 2) % 3, r, (r + 1) % 3}) {
        EXPECT_EQ(Values(now[r], absl::StrFormat("replica/t%d@%d", t, q)), Values(now[q], param))
            << "rank " << r << "'s replica of rank " << q << ", tensor " << t;
      }
    }
  }
}

// dear's elastic commit (Executor::StateLag): right after EndBackward of iteration 4, with its
// all-gathers still in flight, the parameters and the exported state are bit for bit those of
// a run flushed after iteration 3; and a Flush then brings those of iteration 4.
TEST(StateLagTest, DearRightAfterEndBackwardHoldsTheStateOfTheIterationBefore) {
  const Training run{"dear", 3, Kind::kMomentum};
  std::vector<Outcome> flushed_at_3(3), lagged(3), flushed_at_4(3);
  std::mutex mu;
  auto st = testing::FirstError(testing::SpawnRanks(3, [&](transport::Communicator& comm) {
    const int r = comm.rank();
    {
      Model m;
      HERD_ASSIGN_OR_RETURN(auto ex, MakeExecutor(Context(run, "dear", comm, m, 0)));
      HERD_RETURN_IF_ERROR(Drive(run, *ex, r, 0, 4));  // iterations 0-3, flushed
      HERD_ASSIGN_OR_RETURN(ProcessState s, Export(*ex, r, m));
      std::lock_guard<std::mutex> lock(mu);
      flushed_at_3[static_cast<size_t>(r)] = Outcome{m.params, std::move(s)};
    }
    Model m;
    HERD_ASSIGN_OR_RETURN(auto ex, MakeExecutor(Context(run, "dear", comm, m, 0)));
    if (ex->StateLag() != 1) return absl::InternalError("dear's state does not lag");
    HERD_RETURN_IF_ERROR(Drive(run, *ex, r, 0, 4));
    // Iteration 4 up to its EndBackward, not flushed.
    const int T = static_cast<int>(kCounts.size());
    HERD_RETURN_IF_ERROR(ex->BeginIteration(4));
    for (int t = 0; t < T; ++t) HERD_RETURN_IF_ERROR(ex->BeforeForward(t));
    for (int t = T - 1; t >= 0; --t) {
      std::vector<float> g(kCounts[t]);
      for (size_t i = 0; i < g.size(); ++i) g[i] = Grad(run, r, 4, t, i);
      HERD_RETURN_IF_ERROR(ex->GradientReady(t, g));
    }
    HERD_RETURN_IF_ERROR(ex->EndBackward());
    HERD_ASSIGN_OR_RETURN(ProcessState before_flush, Export(*ex, r, m));
    std::vector<std::vector<float>> params_before_flush = m.params;
    HERD_RETURN_IF_ERROR(ex->Flush());
    HERD_ASSIGN_OR_RETURN(ProcessState after_flush, Export(*ex, r, m));
    std::lock_guard<std::mutex> lock(mu);
    lagged[static_cast<size_t>(r)] =
        Outcome{std::move(params_before_flush), std::move(before_flush)};
    flushed_at_4[static_cast<size_t>(r)] = Outcome{m.params, std::move(after_flush)};
    return absl::OkStatus();
  }));
  ASSERT_TRUE(st.ok()) << st;
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(lagged[r].params, flushed_at_3[r].params) << "rank " << r;
    EXPECT_NE(flushed_at_4[r].params, flushed_at_3[r].params) << "rank " << r;
    for (size_t t = 0; t < kCounts.size(); ++t) {
      const std::string momentum = absl::StrFormat("momentum/t%d", t);
      EXPECT_EQ(Values(lagged[r].state, momentum), Values(flushed_at_3[r].state, momentum))
          << "rank " << r << " " << momentum;
    }
  }
}

// A switch allreduce -> dear with momentum, in memory: the parameters after it are those of
// one allreduce run over all the iterations (momentum carried; dropped, they would differ).
TEST(ModeSwitchTest, MomentumSurvivesASwitch) {
  Training run{"allreduce", 3, Kind::kMomentum, 3, 3};
  run.exact_grads = true;  // allreduce and dear then average to the same bits
  Outcomes whole(3), switched(3);
  auto st = testing::FirstError(testing::SpawnRanks(3, [&](transport::Communicator& comm) {
    Model m;
    HERD_ASSIGN_OR_RETURN(auto ex, MakeExecutor(Context(run, "allreduce", comm, m, 0)));
    HERD_RETURN_IF_ERROR(Drive(run, *ex, comm.rank(), 0, 6));
    whole.Set(comm.rank(), Outcome{m.params, {}});
    return absl::OkStatus();
  }));
  ASSERT_TRUE(st.ok()) << st;
  st = testing::FirstError(testing::SpawnRanks(3, [&](transport::Communicator& comm) {
    Model m;
    HERD_ASSIGN_OR_RETURN(auto ex, MakeExecutor(Context(run, "allreduce", comm, m, 0)));
    HERD_RETURN_IF_ERROR(Drive(run, *ex, comm.rank(), 0, 3));
    HERD_ASSIGN_OR_RETURN(ProcessState carried, TakeExecutorState(*ex, comm.rank()));
    ex.reset();
    HERD_ASSIGN_OR_RETURN(ex, MakeExecutor(Context(run, "dear", comm, m, 3)));
    HERD_RETURN_IF_ERROR(GiveExecutorState(*ex, std::move(carried), comm.size()));
    HERD_RETURN_IF_ERROR(Drive(run, *ex, comm.rank(), 3, 6));
    switched.Set(comm.rank(), Outcome{m.params, {}});
    return absl::OkStatus();
  }));
  ASSERT_TRUE(st.ok()) << st;
  for (int r = 0; r < 3; ++r) {
    for (size_t t = 0; t < kCounts.size(); ++t) {
      EXPECT_EQ(whole[r].params[t], switched[r].params[t]) << "rank " << r << " tensor " << t;
    }
  }
}

// sparse -> topk_allgather -> clps: the residual each worker has not delivered yet goes on to
// the next mode, element for element (the fusion layout may differ; the names do not).
TEST(ModeSwitchTest, ResidualsSurviveSwitches) {
  const Training run{"sparse", 2, Kind::kSgd, 4, 0};
  auto st = testing::FirstError(testing::SpawnRanks(2, [&](transport::Communicator& comm) {
    Model m;
    HERD_ASSIGN_OR_RETURN(auto ex, MakeExecutor(Context(run, "sparse", comm, m, 0)));
    HERD_RETURN_IF_ERROR(Drive(run, *ex, comm.rank(), 0, 4));
    int64_t at = 4;
    for (const char* next : {"topk_allgather", "clps"}) {
      HERD_ASSIGN_OR_RETURN(ProcessState carried, TakeExecutorState(*ex, comm.rank()));
      ex.reset();
      HERD_ASSIGN_OR_RETURN(ex, MakeExecutor(Context(run, next, comm, m, at)));
      HERD_RETURN_IF_ERROR(GiveExecutorState(*ex, carried, comm.size()));
      HERD_ASSIGN_OR_RETURN(ProcessState now, TakeExecutorState(*ex, comm.rank()));
      for (size_t t = 0; t < kCounts.size(); ++t) {
        const std::string name = absl::StrFormat("residual/t%d", t);
        auto find = [&](const ProcessState& s) -> const checkpoint::Extent* {
          for (const auto& e : s.extents) {
            if (e.name == name) return &e;
          }
          return nullptr;
        };
        const checkpoint::Extent *a = find(carried), *b = find(now);
        if (a == nullptr || b == nullptr || a->bytes != b->bytes) {
          return absl::InternalError(absl::StrFormat("%s lost %s at the switch", next, name));
        }
      }
      HERD_RETURN_IF_ERROR(Drive(run, *ex, comm.rank(), at, at + 2));
      at += 2;
    }
    return absl::OkStatus();
  }));
  ASSERT_TRUE(st.ok()) << st;
}

// Bad input: state of another length is refused and the executor keeps its own.
TEST(ImportTest, AnotherLengthIsRefusedAndNothingChanges) {
  const Training run{"sparse", 2, Kind::kMomentum, 2, 0};
  auto st = testing::FirstError(testing::SpawnRanks(2, [&](transport::Communicator& comm) {
    Model m;
    HERD_ASSIGN_OR_RETURN(auto ex, MakeExecutor(Context(run, "sparse", comm, m, 0)));
    HERD_RETURN_IF_ERROR(Drive(run, *ex, comm.rank(), 0, 2));
    HERD_ASSIGN_OR_RETURN(ProcessState before, TakeExecutorState(*ex, comm.rank()));
    ProcessState bad = before;
    for (auto& e : bad.extents) {
      if (e.name == "residual/t4") {
        e.total += 1;  // another model
        e.bytes.append(sizeof(float), '\0');
      }
    }
    const absl::Status refused = GiveExecutorState(*ex, bad, comm.size());
    if (!absl::IsFailedPrecondition(refused)) {
      return absl::InternalError("wanted FAILED_PRECONDITION, got " + refused.ToString());
    }
    HERD_ASSIGN_OR_RETURN(ProcessState after, TakeExecutorState(*ex, comm.rank()));
    for (size_t i = 0; i < before.extents.size(); ++i) {
      if (before.extents[i].bytes != after.extents[i].bytes) {
        return absl::InternalError("a refused import changed " + before.extents[i].name);
      }
    }
    return absl::OkStatus();
  }));
  ASSERT_TRUE(st.ok()) << st;
}

// A checkpoint resume (MissingParams::kRefuse) that finds no copy of a tensor's parameters is
// DATA_LOSS naming it and changes nothing; a handover in memory (kKeep) keeps its values.
TEST(ReshardTest, AResumeWithoutSomeTensorsParametersIsRefusedAndChangesNothing) {
  Model m;
  ProcessState partial;
  partial.process = checkpoint::WorkerProcess(0);
  std::vector<float> zeros(kCounts[0], 0.0f);
  checkpoint::AddExtent(partial, "param/t0", static_cast<int64_t>(kCounts[0]), 0,
                        std::span<const float>(zeros));
  const std::vector<std::vector<float>> before = m.params;
  std::vector<ProcessState> one = {partial};
  const MemoryStateSource source(std::move(one), 1);
  absl::Status refused = ImportParams(source, {0, 1}, m.tensors, MissingParams::kRefuse);
  EXPECT_EQ(refused.code(), absl::StatusCode::kDataLoss) << refused;
  EXPECT_NE(refused.message().find("'t1'"), std::string::npos) << refused;
  EXPECT_EQ(m.params, before);
  ASSERT_TRUE(ImportParams(source, {0, 1}, m.tensors, MissingParams::kKeep).ok());
  EXPECT_EQ(m.params[0], zeros);
  EXPECT_EQ(m.params[1], before[1]);
}

}  // namespace
}  // namespace herd::worker
