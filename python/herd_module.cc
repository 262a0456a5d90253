// herd._herd: the worker session (worker/session.h) for Python. The public API is herd.torch
// (python/herd/torch.py), which checks the user's model and optimizer and calls these.
//
// No torch headers here: tensors cross as (address, element count) of fp32 host memory that
// herd/torch.py has checked (fp32, CPU, contiguous) and keeps alive, so the module builds in
// seconds and stays independent of torch's C++ API. Every call that can block (registration,
// the mode's collectives, the waits of dear, the barrier of the end) releases the GIL, so other
// Python threads (a data loader) run meanwhile.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "common/deadline.h"
#include "common/defaults.h"
#include "common/logging.h"
#include "python/c10d/create.h"
#include "scheduler/client/job_wait.h"
#include "worker/data/epoch_order.h"
#include "worker/session.h"

namespace py = pybind11;

namespace herd::python {
namespace {

// Python's view of a failed status. INVALID_ARGUMENT and FAILED_PRECONDITION are the caller's
// mistake (ValueError); everything else is herd's Error (a RuntimeError) naming the code.
PyObject* g_error = nullptr;
void SetErrorType(PyObject* type) { g_error = type; }

[[noreturn]] void Raise(const absl::Status& st) {
  const std::string message = std::string(st.message());
  if (absl::IsInvalidArgument(st) || absl::IsFailedPrecondition(st)) {
    throw py::value_error(message);
  }
  PyErr_SetString(g_error,
                  absl::StrFormat("%s: %s", absl::StatusCodeToString(st.code()), message).c_str());
  throw py::error_already_set();
}

void Check(const absl::Status& st) {
  if (!st.ok()) Raise(st);
}

template <typename T>
T Value(absl::StatusOr<T> v) {
  if (!v.ok()) Raise(v.status());
  return *std::move(v);
}

// Runs `f` (returning a Status) without the GIL, then raises its error with the GIL held.
template <typename F>
void Unlocked(F f) {
  absl::Status st;
  {
    py::gil_scoped_release release;
    st = f();
  }
  Check(st);
}

std::chrono::milliseconds Ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// SIGTERM is a preemption, as for `herd worker` (cli/worker_command.cc): while the session says
// a checkpoint can be taken, the handler only sets the flag the session reads, and the job
// stops at a last checkpoint; otherwise (and at a second SIGTERM) the signal kills the process
// as it always did. Installed only where SIGTERM still has its default action, so a script's
// own handler (signal.signal) is kept.
std::atomic<bool> g_sigterm{false};
std::atomic<bool> g_preemptible{false};

bool InstallPreemptionHandler() {
  struct sigaction old = {};
  if (sigaction(SIGTERM, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) return false;
  struct sigaction sa = {};
  sa.sa_handler = [](int sig) {
    if (!g_preemptible.load() || g_sigterm.exchange(true)) {
      signal(sig, SIG_DFL);
      raise(sig);
    }
  };
  return sigaction(SIGTERM, &sa, nullptr) == 0;
}

// A tensor as herd/torch.py hands it over: fp32 host memory that outlives the session.
struct TensorArg {
  std::string name;
  uintptr_t address;
  size_t count;
  std::vector<int64_t> shape;
  // The tensor's parameter group's rate (a multiple of group 0's, which the pushes carry) and
  // weight decay, where they differ from the job's optimizer: the shards apply them.
  std::optional<double> lr_scale;
  std::optional<double> weight_decay;
};

// The torch optimizer of herd/_optimizer.py as herd's executors see it
// (optim::OptimizerConfig::Kind::kExternal): each tensor's gradient to apply is copied where
// the script said (its .grad, or a buffer of its own), and the torch optimizer's state tensors
// are herd's slots for checkpoints, mode switches and elastic rollbacks. No Python objects are
// held: addresses of tensors herd/_optimizer.py keeps alive, as for the parameters.
class ExternalOptimizer final : public optim::ExternalOptimizer {
 public:
  explicit ExternalOptimizer(std::vector<size_t> counts)
      : counts_(std::move(counts)), dest_(counts_.size(), nullptr) {}

  void Deliver(int tensor, std::span<const float> grad) override {
    if (tensor < 0 || tensor >= static_cast<int>(dest_.size())) return;
    if (float* to = dest_[tensor]) {
      std::copy_n(grad.data(), std::min(grad.size(), counts_[tensor]), to);
    }
    if (immediate_on && immediate) {
      immediate(tensor);
    } else {
      delivered_.push_back(tensor);
    }
  }
  // While set (inside BeginIteration: a checkpoint's cut or a mode switch flushes dear's
  // all-gathers, and copies the parameters right after), each delivery runs the script's step
  // at once, so what is saved or handed on holds the update.
  bool immediate_on = false;
  std::function<void(int)> immediate;
  std::vector<Slot> Slots() override { return slots_; }

  void set_destinations(const std::vector<uintptr_t>& addresses) {
    if (addresses.size() != dest_.size()) {
      throw py::value_error(absl::StrFormat("%d gradient destinations for %d tensors",
                                            addresses.size(), dest_.size()));
    }
    for (size_t t = 0; t < dest_.size(); ++t) dest_[t] = reinterpret_cast<float*>(addresses[t]);
  }
  void set_destination(int tensor, uintptr_t address) {
    if (tensor < 0 || tensor >= static_cast<int>(dest_.size())) throw py::index_error("tensor");
    dest_[tensor] = reinterpret_cast<float*>(address);
  }
  std::vector<int> take_delivered() { return std::exchange(delivered_, {}); }
  void set_slots(const std::vector<std::tuple<std::string, int, uintptr_t, size_t>>& slots) {
    slots_.clear();
    for (const auto& [kind, tensor, address, count] : slots) {
      slots_.push_back({kind, tensor, reinterpret_cast<float*>(address), count});
    }
  }

 private:
  std::vector<size_t> counts_;
  std::vector<float*> dest_;
  std::vector<int> delivered_;
  std::vector<Slot> slots_;
};

class PySession {
 public:
  explicit PySession(const py::dict& o) {
    worker::SessionOptions options;
    options.scheduler.address = o["scheduler"].cast<std::string>();
    options.scheduler.token = o["token"].cast<std::string>();
    options.scheduler.tls = o["tls"].cast<bool>();
    options.scheduler.tls_ca_file = o["tls_ca_file"].cast<std::string>();
    options.job = o["job"].cast<std::string>();
    options.name = o["name"].cast<std::string>();
    // The host the scheduler records for this worker: herd.local_rank() and local_size() count
    // the job's workers on it.
    if (o.contains("host") && !o["host"].cast<std::string>().empty()) {
      options.host = o["host"].cast<std::string>();
    }
    host_ = options.host;
    client_options_ = options.scheduler;
    if (!o["rank"].is_none()) options.rank = o["rank"].cast<int>();
    options.transport = Value(transport::ParseBackend(o["transport"].cast<std::string>()));
    options.timeout = Ms(o["timeout_s"].cast<double>());
    options.start_timeout = Ms(o["start_timeout_s"].cast<double>());
    auto wait = scheduler::ParseDurationFlag(o["wait_for_job"].cast<std::string>());
    if (!wait.ok()) {
      throw py::value_error("HERD_WAIT_FOR_JOB: " + std::string(wait.status().message()));
    }
    options.wait_for_job = *wait;
    options.fusion.threshold_bytes = o["fusion_threshold_kib"].cast<size_t>() << 10;
    options.fusion.tune = o["tune_fusion"].cast<bool>();
    options.timeline_dir = o["timeline_dir"].cast<std::string>();
    options.metrics_listen = o["metrics_listen"].cast<std::string>();
    options.server_tls_ca_file = o["server_tls_ca_file"].cast<std::string>();
    options.server_tls = o["server_tls"].cast<bool>() || !options.server_tls_ca_file.empty();
    auto grace = scheduler::ParseDurationFlag(o["preempt_grace"].cast<std::string>());
    if (!grace.ok())
      throw py::value_error("HERD_PREEMPT_GRACE: " + std::string(grace.status().message()));
    options.preempt_grace = *grace;
    if (InstallPreemptionHandler()) {
      options.stop_requested = &g_sigterm;
      options.preemptible = &g_preemptible;
    }
    // Opens the session without registering (docs/elastic.md, "Rejoin", step 0): the script
    // builds its model and reads its data before its first call that needs the job's
    // membership registers it (register_), so a restarted worker's start-up does not fall in
    // the live workers' wait for it.
    absl::StatusOr<std::unique_ptr<worker::Session>> session;
    {
      py::gil_scoped_release release;
      session = worker::Session::Open(std::move(options));
    }
    session_ = std::shared_ptr<worker::Session>(Value(std::move(session)));
  }

  // Makes this process a worker of the job (Session::Register), once: herd/torch.py calls it
  // from the first call that needs the rank, the membership or the job's state, named by `at`
  // (e.g. "herd.rank()"). A failure is kept and raised again, naming the call and why, at
  // every later call (registering again would only repeat the refusal, or wait out the
  // start timeout once more; a registration that failed after the scheduler took it, opening a
  // resumed job's checkpoint, leaves a session that must not be used either).
  void register_(const std::string& at) {
    if (registered()) return;
    if (register_failed_.ok()) {
      absl::Status st;
      {
        py::gil_scoped_release release;
        st = session_->Register();
      }
      if (st.ok()) return;
      register_failed_ = st;
    }
    PyErr_SetString(g_error,
                    absl::StrFormat("%s: worker '%s' could not register in job '%s': %s: %s", at,
                                    session_->name(), session_->job(),
                                    absl::StatusCodeToString(register_failed_.code()),
                                    register_failed_.message())
                        .c_str());
    throw py::error_already_set();
  }
  bool registered() const { return register_failed_.ok() && session_->registered(); }

  int rank() const { return Registered().rank(); }
  int64_t start_iteration() const { return Registered().start_iteration(); }
  void set_program_value(const std::string& key, const std::string& value) {
    Check(Registered().SetProgramValue(key, value));
  }
  std::map<std::string, std::string> resumed_program_values() const {
    return Registered().resumed_program_values();
  }
  int size() const { return session_->world_size(); }
  std::string host() const { return host_; }
  // The job's worker slots as the scheduler holds them: (rank, name, host, alive), through a
  // client of this object's own (the session's is its own).
  std::vector<std::tuple<int, std::string, std::string, bool>> members() {
    absl::StatusOr<herd::v1::JobStatus> job;
    {
      py::gil_scoped_release release;
      if (client_ == nullptr) {
        auto client = scheduler::SchedulerClient::Connect(client_options_);
        if (!client.ok()) Raise(client.status());
        client_ = *std::move(client);
      }
      job = client_->GetJob(session_->job());
    }
    if (!job.ok()) Raise(job.status());
    std::vector<std::tuple<int, std::string, std::string, bool>> out;
    for (int r = 0; r < job->workers_size(); ++r) {
      const auto& m = job->workers(r);
      out.emplace_back(r, m.name(), m.host(), m.alive());
    }
    return out;
  }
  // The session, shared with the process groups of herd's torch.distributed backend.
  std::shared_ptr<worker::Session> shared() const {
    Registered();
    return session_;
  }
  std::string job() const { return session_->job(); }
  std::string mode() const { return session_->mode(); }
  uint64_t seed() const { return session_->spec().seed(); }
  std::string job_mode() const { return session_->spec().mode().mode(); }

  // The job's optimizer as herd/torch.py compares it with the user's (ps_sync, ps_async).
  py::dict job_optimizer() const {
    optim::OptimizerConfig c = Value(session_->JobOptimizer());
    const auto& spec = session_->spec().optimizer();
    py::dict d;
    const bool adamw =
        c.kind == optim::OptimizerConfig::Kind::kAdam && spec.decoupled_weight_decay();
    d["name"] = adamw ? std::string("adamw") : optim::OptimizerName(c.kind);
    d["lr"] = c.learning_rate;
    d["momentum"] = c.kind == optim::OptimizerConfig::Kind::kMomentum ? c.momentum : 0.0;
    d["weight_decay"] = c.weight_decay;
    d["beta1"] = spec.beta1() > 0 ? spec.beta1() : 0.9;
    d["beta2"] = spec.beta2() > 0 ? spec.beta2() : 0.999;
    d["epsilon"] = spec.epsilon() > 0 ? spec.epsilon() : 1e-8;
    return d;
  }
  static bool optimizer_on_shards(const std::string& mode) {
    return worker::Session::OptimizerOnShards(mode);
  }

  void set_optimizer(const std::string& name, double lr, double momentum, double weight_decay,
                     double beta1, double beta2, double epsilon) {
    optim::OptimizerConfig c;
    c.kind = Value(optim::ParseOptimizer(name));
    c.learning_rate = lr;
    c.momentum = momentum;
    c.weight_decay = weight_decay;
    c.beta1 = beta1;
    c.beta2 = beta2;
    c.epsilon = epsilon;
    lr_->store(lr);
    c.learning_rate_source = lr_;
    session_->SetOptimizer(std::move(c));
  }
  void set_learning_rate(double lr) { lr_->store(lr); }

  // The script's torch optimizer applies the updates (herd/_optimizer.py): before attach.
  void use_external_optimizer(const std::vector<size_t>& counts) {
    external_ = std::make_shared<ExternalOptimizer>(counts);
    optim::OptimizerConfig c;
    c.kind = optim::OptimizerConfig::Kind::kExternal;
    c.external = external_;
    c.learning_rate_source = lr_;
    session_->SetOptimizer(std::move(c));
  }
  ExternalOptimizer& external() {
    if (!external_) Check(absl::FailedPreconditionError("no external optimizer"));
    return *external_;
  }

  void attach(const std::vector<TensorArg>& tensors, int64_t planned_iterations) {
    Registered();
    std::vector<worker::ModelTensor> model;
    std::vector<herd::v1::TensorSpec> layout;
    for (const TensorArg& t : tensors) {
      model.push_back({t.name, reinterpret_cast<float*>(t.address), t.count});
      herd::v1::TensorSpec spec;
      spec.set_name(t.name);
      for (int64_t d : t.shape) spec.add_shape(d);
      spec.set_dtype("fp32");
      if (t.lr_scale) spec.set_lr_scale(*t.lr_scale);
      if (t.weight_decay) spec.set_weight_decay(*t.weight_decay);
      layout.push_back(std::move(spec));
    }
    Unlocked(
        [&] { return session_->Attach(std::move(model), std::move(layout), planned_iterations); });
  }

  // dear's deferred steps, run by the script's optimizer when BeginIteration flushes them.
  void set_immediate_step(py::function f) {
    immediate_step_ = std::move(f);
    if (external_) {
      external_->immediate = [this](int tensor) {
        py::gil_scoped_acquire acquire;
        if (immediate_error_) return;  // the first error stands; the rest are skipped
        try {
          immediate_step_(tensor);
        } catch (py::error_already_set& e) {
          immediate_error_ = std::make_unique<py::error_already_set>(std::move(e));
        }
      };
    }
  }

  std::string begin_iteration(int64_t iteration) {
    absl::StatusOr<worker::Executor*> ex;
    {
      py::gil_scoped_release release;
      if (external_) external_->immediate_on = true;
      ex = session_->BeginIteration(iteration);
      if (external_) external_->immediate_on = false;
    }
    if (immediate_error_) {
      std::unique_ptr<py::error_already_set> e = std::move(immediate_error_);
      throw std::move(*e);
    }
    if (!ex.ok()) {
      executor_ = nullptr;
      failed_ = ex.status();
    }
    executor_ = Value(ex);
    return std::string(executor_->mode());
  }

  void before_forward(int tensor) {
    worker::Executor* ex = Current();
    Unlocked([&] { return Diagnosed(ex->BeforeForward(tensor)); });
  }

  void gradient_ready(int tensor, uintptr_t address, size_t count) {
    const std::span<const float> grad(reinterpret_cast<const float*>(address), count);
    worker::Executor* ex = Current();
    Unlocked([&] { return Diagnosed(ex->GradientReady(tensor, grad)); });
  }

  void end_backward() {
    worker::Executor* ex = Current();
    Unlocked([&] { return Diagnosed(ex->EndBackward()); });
  }

  void end_iteration(double loss, double forward_s, double backward_s, int64_t samples) {
    worker::StepStats stats;
    stats.loss = loss;
    stats.forward_seconds = forward_s;
    stats.backward_seconds = backward_s;
    stats.samples = samples;
    // Reports the iteration to the scheduler (an RPC): other Python threads run meanwhile.
    Unlocked([&] { return Kept(session_->EndIteration(stats)); });
  }

  void flush() {
    Unlocked([&] { return Diagnosed(Kept(session_->Flush())); });
  }

  double exposed_comm_seconds() const { return session_->exposed_comm_seconds(); }

  // ---- Elastic membership (docs/elastic.md, docs/python.md "Elastic jobs") ----
  bool elastic() const { return session_->spec().has_elastic(); }
  bool preempted() const { return session_->preempted(); }
  // Where the script is in herd's data order, before each iteration begins (saved with
  // checkpoints, handed to a joining worker, returned by a rollback).
  void set_data_position(int64_t epoch, int64_t offset) {
    session_->SetDataPosition({epoch, offset});
  }
  std::pair<int64_t, int64_t> start_position() const {
    const worker::DataPosition& at = session_->start_position();
    return {at.epoch, at.offset};
  }
  // The iteration start_position is the position of (before start_iteration only for a
  // worker that joined a running ps_async job: the sampler advances it).
  int64_t start_position_iteration() const { return session_->start_position_iteration(); }
  // This worker's part (first, count) of the global batch of `batch_size` x the job's workers,
  // in the iteration begun last (after a shrink: its share among the live workers).
  std::pair<int64_t, int64_t> data_slice(int batch_size) const {
    const worker::BatchSlice slice = session_->DataSlice(batch_size);
    return {slice.first, slice.count};
  }
  // Rolls back after the error the last failed call raised (Session::Recover): the iteration to
  // run again and its data position (iteration, epoch, offset), or raises the error itself
  // when no membership change is behind it.
  std::tuple<int64_t, int64_t, int64_t> recover() {
    if (failed_.ok()) Check(absl::FailedPreconditionError("recover(): no call of herd failed"));
    absl::StatusOr<worker::Session::Rollback> back;
    {
      py::gil_scoped_release release;
      back = session_->Recover(failed_);
    }
    failed_ = absl::OkStatus();
    executor_ = nullptr;
    worker::Session::Rollback r = Value(std::move(back));
    return {r.iteration, r.position.epoch, r.position.offset};
  }

  void finish(int64_t iterations, double final_loss, double test_accuracy, double train_seconds,
              double samples_per_second, const std::map<std::string, double>& metrics) {
    Registered();
    herd::v1::TrainingResult result;
    result.set_iterations(iterations);
    result.set_final_loss(final_loss);
    result.set_test_accuracy(test_accuracy);
    result.set_train_seconds(train_seconds);
    result.set_samples_per_second(samples_per_second);
    result.set_exposed_comm_seconds(session_->exposed_comm_seconds());
    for (const auto& [k, v] : metrics) (*result.mutable_metrics())[k] = v;
    Unlocked([&] { return session_->Finish(std::move(result)).status(); });
  }

  // Fails the job because of this process (an exception in the user's script). A script that
  // raised before its first registering call registers to say so, as the built-in worker
  // whose model cannot be built does (worker/runtime.cc): at a job's start the others would
  // otherwise wait out their start timeout for it.
  void fail(const std::string& why) {
    py::gil_scoped_release release;
    if (!session_->registered() && register_failed_.ok()) register_failed_ = session_->Register();
    if (!session_->registered()) {
      // Not a worker of the job: the failure is this process's own (the job is not failed).
      const std::string refusal(register_failed_.message());
      Log().warn(
          "worker '{}': {}{}", session_->name(), why,
          absl::StrContains(why, refusal)
              ? ""
              : absl::StrFormat(" (not registered in job '%s': %s)", session_->job(), refusal));
      return;
    }
    session_->Fail(session_->Diagnose(absl::UnknownError(why)));
  }

  // Every rank's `value` under `key` (one key per call and rank, through the job's store at
  // the scheduler), by rank: the small collectives of herd.allreduce / herd.broadcast. In an
  // elastic job a rank the scheduler declared dead is left out (it would never answer).
  std::map<int, py::bytes> exchange(const std::string& key, const std::string& value, int root) {
    std::map<int, std::string> out;
    Unlocked([&] { return Exchange(key, value, root, out); });
    std::map<int, py::bytes> bytes;
    for (auto& [r, v] : out) bytes.emplace(r, py::bytes(v));
    return bytes;
  }

 private:
  absl::Status Exchange(const std::string& key, const std::string& value, int root,
                        std::map<int, std::string>& out) {
    if (!registered()) return NotRegistered();
    transport::Store& store = session_->store();
    const std::string prefix = "python/" + key + "/";
    if (root < 0 || root == rank()) {
      if (auto st = store.Set(prefix + std::to_string(rank()), value); !st.ok()) return st;
    }
    const Deadline deadline = Deadline::After(timeout_);
    const bool elastic = session_->spec().has_elastic();
    for (int r = 0; r < size(); ++r) {
      if (root >= 0 && r != root) continue;
      for (;;) {
        // Elastic: wait in short slices, asking between them whether the rank is still alive.
        const Deadline slice = elastic && deadline.remaining() > std::chrono::seconds(1)
                                   ? Deadline::After(std::chrono::seconds(1))
                                   : deadline;
        absl::StatusOr<std::string> v = store.Get(prefix + std::to_string(r), slice);
        if (v.ok()) {
          out[r] = *std::move(v);
          break;
        }
        if (!elastic || deadline.expired() || !absl::IsDeadlineExceeded(v.status())) {
          return session_->Diagnose(v.status());
        }
        absl::StatusOr<std::vector<int>> live = session_->LiveRanks();
        if (live.ok() && std::find(live->begin(), live->end(), r) == live->end()) {
          if (r == root) {
            return absl::UnavailableError(absl::StrFormat(
                "the root rank %d of %s left the job (the scheduler declared it dead)", r, key));
          }
          break;  // a dead rank's value is left out
        }
      }
    }
    return absl::OkStatus();
  }

  // The session, registered: herd/torch.py registers (register_) before every call that needs
  // it; a call that comes first is herd's own mistake, raised rather than read as rank -1.
  worker::Session& Registered() const {
    if (!registered()) Raise(NotRegistered());
    return *session_;
  }
  static absl::Status NotRegistered() {
    return absl::InternalError(
        "herd: a call that needs this worker's registration in the job came before it");
  }

  worker::Executor* Current() {
    if (executor_ == nullptr) Check(absl::FailedPreconditionError("no iteration has begun"));
    return executor_;
  }
  absl::Status Diagnosed(absl::Status st) {
    return st.ok() ? st : session_->Diagnose(Kept(std::move(st)));
  }
  // Keeps the error of a failed call as it was (before Diagnose) for recover().
  absl::Status Kept(absl::Status st) {
    if (!st.ok()) failed_ = st;
    return st;
  }

  std::shared_ptr<worker::Session> session_;
  std::shared_ptr<ExternalOptimizer> external_;
  py::object immediate_step_;
  std::unique_ptr<py::error_already_set> immediate_error_;
  std::string host_;
  scheduler::ClientOptions client_options_;
  std::unique_ptr<scheduler::SchedulerClient> client_;  // members()
  worker::Executor* executor_ = nullptr;
  absl::Status failed_;           // the last failed call's error, for recover()
  absl::Status register_failed_;  // why register_() failed, raised again at every later call
  std::shared_ptr<std::atomic<double>> lr_ = std::make_shared<std::atomic<double>>(0.0);
  std::chrono::milliseconds timeout_{defaults::kOperationTimeout};
};

}  // namespace
}  // namespace herd::python

PYBIND11_MODULE(_herd, m) {
  using namespace herd::python;
  using herd::worker::EpochOrder;
  m.doc() = "herd's worker session (use herd.torch)";
  static py::exception<std::runtime_error> error(m, "Error", PyExc_RuntimeError);
  SetErrorType(error.ptr());
  // The defaults `herd worker` starts from (common/defaults.h): the package reads them here
  // rather than writing them again.
  py::dict defaults;
  defaults["timeout_s"] = static_cast<double>(herd::defaults::kOperationTimeout.count());
  defaults["start_timeout_s"] = static_cast<double>(herd::defaults::kStartTimeout.count());
  defaults["wait_for_job"] = herd::defaults::FlagText(herd::defaults::kWaitForJob);
  defaults["preempt_grace"] = herd::defaults::FlagText(herd::defaults::kPreemptionGrace);
  m.attr("DEFAULTS") = defaults;

  py::class_<TensorArg>(m, "TensorArg")
      .def(
          py::init([](std::string name, uintptr_t address, size_t count, std::vector<int64_t> shape,
                      std::optional<double> lr_scale, std::optional<double> weight_decay) {
            return TensorArg{std::move(name),  address,  count,
                             std::move(shape), lr_scale, weight_decay};
          }),
          py::arg("name"), py::arg("address"), py::arg("count"), py::arg("shape"),
          py::arg("lr_scale") = std::nullopt, py::arg("weight_decay") = std::nullopt);

  py::class_<PySession>(m, "Session")
      .def(py::init<const py::dict&>())
      .def("register", &PySession::register_)
      .def_property_readonly("registered", &PySession::registered)
      .def_property_readonly("rank", &PySession::rank)
      .def_property_readonly("size", &PySession::size)
      .def_property_readonly("host", &PySession::host)
      .def("members", &PySession::members)
      .def_property_readonly("start_iteration", &PySession::start_iteration)
      .def("set_program_value", &PySession::set_program_value)
      .def("resumed_program_values", &PySession::resumed_program_values)
      .def_property_readonly("job", &PySession::job)
      .def_property_readonly("mode", &PySession::mode)
      .def_property_readonly("job_mode", &PySession::job_mode)
      .def_property_readonly("seed", &PySession::seed)
      .def_property_readonly("exposed_comm_seconds", &PySession::exposed_comm_seconds)
      .def("job_optimizer", &PySession::job_optimizer)
      .def_static("optimizer_on_shards", &PySession::optimizer_on_shards)
      .def("set_optimizer", &PySession::set_optimizer)
      .def("set_learning_rate", &PySession::set_learning_rate)
      .def("use_external_optimizer", &PySession::use_external_optimizer)
      .def("set_gradient_destinations",
           [](PySession& s, const std::vector<uintptr_t>& a) { s.external().set_destinations(a); })
      .def("set_gradient_destination",
           [](PySession& s, int t, uintptr_t a) { s.external().set_destination(t, a); })
      .def("take_delivered", [](PySession& s) { return s.external().take_delivered(); })
      .def("set_immediate_step", &PySession::set_immediate_step)
      .def("set_optimizer_slots",
           [](PySession& s, const std::vector<std::tuple<std::string, int, uintptr_t, size_t>>& v) {
             s.external().set_slots(v);
           })
      .def("attach", &PySession::attach)
      .def("begin_iteration", &PySession::begin_iteration)
      .def("before_forward", &PySession::before_forward)
      .def("gradient_ready", &PySession::gradient_ready)
      .def("end_backward", &PySession::end_backward)
      .def("end_iteration", &PySession::end_iteration)
      .def("flush", &PySession::flush)
      .def("finish", &PySession::finish)
      .def("fail", &PySession::fail)
      .def("exchange", &PySession::exchange)
      .def_property_readonly("elastic", &PySession::elastic)
      .def_property_readonly("preempted", &PySession::preempted)
      .def_property_readonly("start_position", &PySession::start_position)
      .def_property_readonly("start_position_iteration", &PySession::start_position_iteration)
      .def("set_data_position", &PySession::set_data_position)
      .def("data_slice", &PySession::data_slice)
      .def("recover", &PySession::recover);

  // herd's torch.distributed backend (python/c10d/create.h); herd/_backend.py calls it.
  m.def(
      "create_process_group",
      [](py::handle store, int rank, int size, double timeout_s, const std::string& group_id,
         std::vector<int64_t> global_ranks, py::object session, bool session_store,
         double heartbeat_timeout_s, bool check_calls) {
        c10d_backend::GroupSetup setup;
        setup.rank = rank;
        setup.size = size;
        setup.timeout_s = timeout_s;
        setup.group_id = group_id;
        setup.global_ranks = std::move(global_ranks);
        if (!session.is_none()) setup.session = session.cast<PySession&>().shared();
        setup.session_store = session_store;
        setup.heartbeat_timeout_s = heartbeat_timeout_s;
        setup.check_calls = check_calls;
        return c10d_backend::CreateProcessGroup(store, setup);
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_s"), py::arg("group_id"),
      py::arg("global_ranks"), py::arg("session"), py::arg("session_store"),
      py::arg("heartbeat_timeout_s"), py::arg("check_calls"));

  // The global data order of worker/data/epoch_order.h, bit for bit.
  m.def("epoch_order",
        [](int64_t count, uint64_t seed, int64_t epoch) { return EpochOrder(count, seed, epoch); });
}
