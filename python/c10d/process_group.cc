// ProcessGroupHerd: torch.distributed's operations over herd's communicator and collectives.
//
// Threading, as gloo's: every collective is queued, in the order the program calls them, and
// run by the group's own thread, which first exchanges the call's descriptor with every rank
// (collective_check.h: desynchronised ranks are named, and the exchange is the barrier), then
// runs herd's collective on the tensors (in place where torch allows it). The Work it returns
// completes, with its future (DDP's communication hooks chain on it), when the collective has.
// Point-to-point send/recv are posted at once on the communicator (not queued, so a receive
// posted before a collective cannot hold the collective up) and complete in Work::wait.
//
// What herd's reductions do not cover (PRODUCT and the bitwise ops, int8/int16/bool tensors)
// is all-gathered with herd's all-gather and folded with torch on every rank; sparse tensors
// likewise (gloo does the same for them).

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/utils/pybind.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "algorithms/collectives/alltoall.h"
#include "algorithms/collectives/run.h"
#include "common/dtype.h"
#include "common/reduce.h"
#include "python/c10d/collective_check.h"
#include "python/c10d/create.h"
#include "python/c10d/staging.h"
#include "python/c10d/torch_seam.h"
#include "transport/connect.h"
#include "worker/session.h"

namespace herd::python::c10d_backend {
namespace {

namespace py = pybind11;
using ::c10d::OpType;
using RedOp = ::c10d::ReduceOp;
using namespace std::chrono_literals;

// A std::runtime_error (Python's RuntimeError with the message alone: a c10::Error rethrown
// from a Work would carry a C++ backtrace into the message).
[[noreturn]] void Throw(const absl::Status& st) {
  throw std::runtime_error(
      absl::StrFormat("herd: %s: %s", absl::StatusCodeToString(st.code()), st.message()));
}
void Check(const absl::Status& st) {
  if (!st.ok()) Throw(st);
}

std::string TypeName(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return "float32";
    case at::kDouble:
      return "float64";
    case at::kHalf:
      return "float16";
    case at::kBFloat16:
      return "bfloat16";
    case at::kInt:
      return "int32";
    case at::kLong:
      return "int64";
    case at::kShort:
      return "int16";
    case at::kChar:
      return "int8";
    case at::kByte:
      return "uint8";
    case at::kBool:
      return "bool";
    default:
      return c10::toString(t);
  }
}

std::optional<DType> HerdType(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return DType::kFloat32;
    case at::kDouble:
      return DType::kFloat64;
    case at::kHalf:
      return DType::kFloat16;
    case at::kBFloat16:
      return DType::kBFloat16;
    case at::kInt:
      return DType::kInt32;
    case at::kLong:
      return DType::kInt64;
    case at::kByte:
      return DType::kUInt8;
    default:
      return std::nullopt;
  }
}

std::string Shape(const at::Tensor& t) {
  std::string s = TypeName(t.scalar_type()) + "[" + absl::StrJoin(t.sizes(), ", ") + "]";
  if (t.is_sparse()) s = "sparse " + s;
  if (t.is_cuda()) s += " on " + t.device().str();
  return s;
}
std::string Shapes(const std::vector<at::Tensor>& ts) {
  std::vector<std::string> parts;
  for (const at::Tensor& t : ts) parts.push_back(Shape(t));
  return parts.size() == 1 ? parts[0] : "[" + absl::StrJoin(parts, ", ") + "]";
}

std::string OpName(RedOp::RedOpType op) {
  switch (op) {
    case RedOp::SUM:
      return "sum";
    case RedOp::AVG:
      return "avg";
    case RedOp::PRODUCT:
      return "product";
    case RedOp::MIN:
      return "min";
    case RedOp::MAX:
      return "max";
    case RedOp::BAND:
      return "band";
    case RedOp::BOR:
      return "bor";
    case RedOp::BXOR:
      return "bxor";
    case RedOp::PREMUL_SUM:
      return "premul_sum";
    default:
      return "unknown";
  }
}

// The herd reduction for (op, dtype), when herd's kernels have one.
std::optional<ReduceOp> HerdReduce(RedOp::RedOpType op, at::ScalarType t) {
  if (!HerdType(t)) return std::nullopt;
  switch (op) {
    case RedOp::SUM:
      return ReduceOp::kSum;
    case RedOp::MIN:
      return ReduceOp::kMin;
    case RedOp::MAX:
      return ReduceOp::kMax;
    case RedOp::AVG:
      if (at::isFloatingType(t)) return ReduceOp::kAverage;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

void CheckReduction(RedOp::RedOpType op, at::ScalarType t) {
  TORCH_CHECK(op != RedOp::PREMUL_SUM && op != RedOp::UNUSED, "herd: ReduceOp.", OpName(op),
              " is not supported by the herd backend (NCCL's PREMUL_SUM: scale the tensor, then "
              "SUM)");
  TORCH_CHECK(!(op == RedOp::AVG && !at::isFloatingType(t)),
              "herd: ReduceOp.AVG needs a floating tensor, got ", TypeName(t),
              " (integer division would truncate: use SUM and divide)");
  TORCH_CHECK(
      !((op == RedOp::BAND || op == RedOp::BOR || op == RedOp::BXOR) && at::isFloatingType(t)),
      "herd: ReduceOp.", OpName(op), " needs an integer or bool tensor, got ", TypeName(t));
}

// torch's fold of P stacked vectors ([P, n] -> [n]) for what herd's kernels do not reduce.
at::Tensor Fold(const at::Tensor& input, RedOp::RedOpType op, at::ScalarType t) {
  // torch's CPU kernels lack some reductions of the 16-bit floats: fold those in fp32.
  const at::Tensor stacked = t == at::kHalf || t == at::kBFloat16 ? input.to(at::kFloat) : input;
  if (t == at::kBool) {
    switch (op) {
      case RedOp::SUM:
      case RedOp::MAX:
      case RedOp::BOR:
        return stacked.any(0);
      case RedOp::PRODUCT:
      case RedOp::MIN:
      case RedOp::BAND:
        return stacked.all(0);
      case RedOp::BXOR:
        return stacked.to(at::kByte).sum(0).remainder(2).to(at::kBool);
      default:
        break;
    }
  }
  switch (op) {
    case RedOp::SUM:
      return stacked.sum(0).to(t);
    case RedOp::AVG:
      return stacked.mean(0).to(t);
    case RedOp::PRODUCT:
      return stacked.prod(0).to(t);
    case RedOp::MIN:
      return std::get<0>(stacked.min(0)).to(t);
    case RedOp::MAX:
      return std::get<0>(stacked.max(0)).to(t);
    case RedOp::BAND:
    case RedOp::BOR:
    case RedOp::BXOR: {
      at::Tensor acc = stacked[0].clone();
      for (int64_t r = 1; r < stacked.size(0); ++r) {
        if (op == RedOp::BAND) acc.bitwise_and_(stacked[r]);
        if (op == RedOp::BOR) acc.bitwise_or_(stacked[r]);
        if (op == RedOp::BXOR) acc.bitwise_xor_(stacked[r]);
      }
      return acc;
    }
    default:
      TORCH_CHECK(false, "herd: ReduceOp.", OpName(op), " is not supported");
  }
}

void* Data(const at::Tensor& t) { return t.data_ptr(); }

// ---- the c10d store as herd's bootstrap store ----------------------------------------------

class C10dStore final : public transport::Store {
 public:
  explicit C10dStore(c10::intrusive_ptr<::c10d::Store> store) : store_(std::move(store)) {}

  absl::Status Set(std::string_view key, std::string_view value) override {
    try {
      store_->set(std::string(key), std::vector<uint8_t>(value.begin(), value.end()));
      return absl::OkStatus();
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          absl::StrFormat("torch's c10d store failed to set '%s': %s", key, e.what()));
    }
  }

  absl::StatusOr<std::string> Get(std::string_view key, Deadline deadline) override {
    const std::string k(key);
    try {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline.remaining());
      store_->wait({k}, std::max(left, std::chrono::milliseconds(1)));
      std::vector<uint8_t> v = store_->get(k);
      return std::string(v.begin(), v.end());
    } catch (const std::exception& e) {
      if (deadline.expired()) {
        return absl::DeadlineExceededError(
            absl::StrFormat("key '%s' did not appear in torch's c10d store in time", key));
      }
      return absl::UnavailableError(
          absl::StrFormat("torch's c10d store failed to get '%s': %s", key, e.what()));
    }
  }

 private:
  c10::intrusive_ptr<::c10d::Store> store_;
};

// ---- failure detection ---------------------------------------------------------------------

// Polled by the group's watchdog thread (every 100 ms); an error aborts the communicator.
class Liveness {
 public:
  virtual ~Liveness() = default;
  virtual absl::Status Check() = 0;
  virtual void Leave() {}
};

// In a herd job: the scheduler's view, as the session's heartbeat hears it.
class JobLiveness final : public Liveness {
 public:
  explicit JobLiveness(std::shared_ptr<worker::Session> session) : session_(std::move(session)) {}
  absl::Status Check() override { return session_->job_outcome(); }

 private:
  std::shared_ptr<worker::Session> session_;
};

// Outside herd jobs: every rank adds to its counter in torch's store once a second and watches
// the others'; a rank whose counter stands still for the timeout is named. A rank that closes
// its group says so first (a clean exit is not a death).
class StoreHeartbeat final : public Liveness {
 public:
  StoreHeartbeat(c10::intrusive_ptr<::c10d::Store> store, int rank, int size,
                 std::chrono::milliseconds timeout)
      : store_(std::move(store)),
        rank_(rank),
        size_(size),
        timeout_(timeout),
        last_(size, -1),
        changed_(size, Clock::now()) {}

  absl::Status Check() override {
    const auto now = Clock::now();
    if (now - beat_ < kInterval) return absl::OkStatus();
    beat_ = now;
    try {
      store_->add(Key(rank_), 1);
      for (int r = 0; r < size_; ++r) {
        if (r == rank_ || left_.count(r)) continue;
        const int64_t v = store_->add(Key(r), 0);
        if (v != last_[r]) {
          last_[r] = v;
          changed_[r] = now;
          continue;
        }
        if (now - changed_[r] < timeout_) continue;
        if (store_->check({LeftKey(r)})) {
          left_.insert({r, true});
          continue;
        }
        return absl::UnavailableError(absl::StrFormat(
            "rank %d stopped heartbeating: no beat for %d s (its process is stopped or hung, or "
            "its host is gone)",
            r, std::chrono::duration_cast<std::chrono::seconds>(now - changed_[r]).count()));
      }
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrFormat(
          "torch's c10d store stopped answering the heartbeat (%s): the process that serves it "
          "(rank 0 for env:// and tcp://) is gone",
          e.what()));
    }
    return absl::OkStatus();
  }

  void Leave() override {
    try {
      store_->set(LeftKey(rank_), std::vector<uint8_t>{'1'});
    } catch (const std::exception&) {
    }
  }

 private:
  static constexpr auto kInterval = std::chrono::milliseconds(1000);
  static std::string Key(int r) { return absl::StrFormat("herd/heartbeat/%d", r); }
  static std::string LeftKey(int r) { return absl::StrFormat("herd/left/%d", r); }

  c10::intrusive_ptr<::c10d::Store> store_;
  const int rank_, size_;
  const std::chrono::milliseconds timeout_;
  std::vector<int64_t> last_;
  std::vector<Clock::time_point> changed_;
  std::map<int, bool> left_;
  Clock::time_point beat_{};
};

// ---- the works -----------------------------------------------------------------------------

class HerdWork : public ::c10d::Work {
 public:
  HerdWork(int rank, OpType type, const char* title, std::vector<at::Tensor> outputs,
           const c10::optional<std::vector<at::Tensor>>& inputs)
      : Work(rank, type, title, inputs),
        outputs_(std::move(outputs)),
        future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors())) {}

  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  void Complete(std::exception_ptr error) {
    if (error) {
      finish(error);
      future_->setError(error);
    } else {
      finish();
      future_->markCompleted(c10::IValue(outputs_));
    }
  }

 protected:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

struct Group;

// A send or receive: posted on the communicator at once, completed by wait().
class P2PWork final : public HerdWork {
 public:
  P2PWork(std::shared_ptr<Group> group, int rank, OpType type, const char* title, at::Tensor tensor,
          at::Tensor staging, std::function<absl::Status(Deadline, int& source)> complete,
          std::chrono::milliseconds timeout)
      : HerdWork(rank, type, title, {tensor}, c10::nullopt),
        group_(std::move(group)),
        tensor_(std::move(tensor)),
        staging_(std::move(staging)),
        complete_(std::move(complete)),
        timeout_(timeout) {}

  bool isCompleted() override {
    if (Work::isCompleted()) return true;
    Run(Deadline::After(1ms), /*poll=*/true);
    return Work::isCompleted();
  }

  bool wait(std::chrono::milliseconds timeout) override {
    Run(Deadline::After(timeout == kNoTimeout ? timeout_ : timeout), /*poll=*/false);
    return Work::wait(kNoTimeout);
  }

  int sourceRank() const override { return source_; }

 private:
  void Run(Deadline deadline, bool poll) {
    std::lock_guard<std::mutex> lock(run_mu_);
    if (Work::isCompleted()) return;
    absl::Status st = complete_(deadline, source_);
    if (poll && absl::IsDeadlineExceeded(st)) return;  // still in flight
    if (st.ok() && staging_.defined()) tensor_.copy_(staging_);
    std::exception_ptr error;
    if (!st.ok()) {
      try {
        Throw(st);
      } catch (...) {
        error = std::current_exception();
      }
    }
    Complete(error);
  }

  std::shared_ptr<Group> group_;  // keeps the communicator alive while a request is in flight
  at::Tensor tensor_, staging_;
  std::function<absl::Status(Deadline, int&)> complete_;
  std::chrono::milliseconds timeout_;
  std::mutex run_mu_;
  int source_ = -1;
};

// What the works of a group share: the communicator (and NCCL's, for CUDA tensors).
struct Group {
  // The communicator goes first: no receive it still holds may outlive its buffer.
  ~Group() { comm.reset(); }
  std::unique_ptr<transport::Communicator> comm;
  std::string name;  // "process group 0"
  // recvAnysource: receives posted on every peer; the ones that did not win are kept for the
  // next receive of that (peer, tag), so no message is lost or taken by the wrong call.
  struct Stray {
    transport::Request request;
    at::Tensor buffer;
  };
  std::mutex strays_mu;
  std::map<std::pair<int, int>, std::deque<std::shared_ptr<Stray>>> strays;
  // Receives of a failed monitored barrier, still posted: their buffers live as long as the
  // communicator.
  std::vector<std::shared_ptr<Stray>> leftovers;
};

// ---- the group -----------------------------------------------------------------------------

class ProcessGroupHerd final : public BackendBase {
 public:
  ProcessGroupHerd(const GroupSetup& setup, std::unique_ptr<transport::Communicator> comm,
                   std::unique_ptr<Liveness> liveness)
      : BackendBase(setup.rank, setup.size),
        group_(std::make_shared<Group>()),
        timeout_(std::chrono::milliseconds(static_cast<int64_t>(setup.timeout_s * 1000))),
        check_calls_(setup.check_calls),
        liveness_(std::move(liveness)) {
    group_->comm = std::move(comm);
    group_->name = absl::StrFormat("herd process group '%s'", setup.group_id);
    init();  // torch's usage logging of the backend
    worker_ = std::thread([this] { Loop(); });
    watchdog_ = std::thread([this] { Watch(); });
  }

  ~ProcessGroupHerd() override {
    bool busy = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      busy = running_ || !queue_.empty();
    }
    // Destroyed with collectives outstanding (the program is leaving): they fail at once
    // rather than wait out their timeout for peers that may be gone.
    if (busy) (void)group_->comm->abort(absl::CancelledError(group_->name + " was destroyed"));
    cv_.notify_all();
    worker_.join();
    watchdog_.join();
    if (liveness_) liveness_->Leave();
  }

  const std::string getBackendName() const override { return "herd"; }

  // ---- collectives ----

  c10::intrusive_ptr<::c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                             const ::c10d::BroadcastOptions& opts) override {
    CheckTensors("broadcast", tensors);
    const int root = static_cast<int>(opts.rootRank);
    CheckRoot("broadcast", root);
    TORCH_CHECK(opts.rootTensor >= 0 && opts.rootTensor < static_cast<int64_t>(tensors.size()),
                "herd: broadcast: rootTensor ", opts.rootTensor, " out of range");
    const at::Tensor t = tensors[opts.rootTensor];
    return Enqueue(OpType::BROADCAST, "herd:broadcast", tensors, tensors,
                   Call(absl::StrFormat("broadcast(root %d)", root), Shapes(tensors)), opts.timeout,
                   [=, this](Deadline d) {
                     at::Tensor buf = t.is_contiguous() ? t : t.contiguous();
                     collectives::BroadcastOptions o;
                     Fill(o, buf, d);
                     o.root = root;
                     Check(collectives::Broadcast(o));
                     if (!buf.is_same(t)) t.copy_(buf);
                     for (const at::Tensor& other : tensors) {
                       if (!other.is_same(t)) other.copy_(t);
                     }
                   });
  }

  c10::intrusive_ptr<::c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                             const ::c10d::AllreduceOptions& opts) override {
    CheckTensors("allreduce", tensors);
    const RedOp::RedOpType op = opts.reduceOp;
    CheckReduction(op, tensors[0].scalar_type());
    return Enqueue(OpType::ALLREDUCE, "herd:all_reduce", tensors, tensors,
                   Call("allreduce(" + OpName(op) + ")", Shapes(tensors)), opts.timeout,
                   [=, this](Deadline d) {
                     if (tensors[0].is_sparse()) return SparseAllReduce(tensors, op, d);
                     at::Tensor buf = LocalSum(tensors, op);
                     AllReduceInPlace(buf, op, d);
                     for (const at::Tensor& t : tensors) {
                       if (!t.is_same(buf)) t.copy_(buf);
                     }
                   });
  }

  c10::intrusive_ptr<::c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const ::c10d::AllreduceCoalescedOptions& opts) override {
    CheckList("allreduce_coalesced", tensors, /*same_shape=*/false);
    const RedOp::RedOpType op = opts.reduceOp;
    CheckReduction(op, tensors[0].scalar_type());
    return Enqueue(OpType::ALLREDUCE_COALESCED, "herd:all_reduce_coalesced", tensors, tensors,
                   Call("allreduce_coalesced(" + OpName(op) + ")", Shapes(tensors)), opts.timeout,
                   [=, this](Deadline d) {
                     at::Tensor buf = Concatenated(tensors);
                     AllReduceInPlace(buf, op, d);
                     int64_t at = 0;
                     for (const at::Tensor& t : tensors) {
                       t.copy_(buf.narrow(0, at, t.numel()).view(t.sizes()));
                       at += t.numel();
                     }
                   });
  }

  c10::intrusive_ptr<::c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                          const ::c10d::ReduceOptions& opts) override {
    CheckTensors("reduce", tensors);
    const int root = static_cast<int>(opts.rootRank);
    CheckRoot("reduce", root);
    const RedOp::RedOpType op = opts.reduceOp;
    CheckReduction(op, tensors[0].scalar_type());
    TORCH_CHECK(opts.rootTensor >= 0 && opts.rootTensor < static_cast<int64_t>(tensors.size()),
                "herd: reduce: rootTensor ", opts.rootTensor, " out of range");
    const at::Tensor t = tensors[opts.rootTensor];
    return Enqueue(OpType::REDUCE, "herd:reduce", tensors, tensors,
                   Call(absl::StrFormat("reduce(%s, root %d)", OpName(op), root), Shapes(tensors)),
                   opts.timeout, [=, this](Deadline d) {
                     std::optional<ReduceOp> herd_op = HerdReduce(op, t.scalar_type());
                     at::Tensor buf = t.is_contiguous() ? t : t.contiguous();
                     if (!herd_op) {
                       // The ranks that are not the root keep scratch, as herd's Reduce leaves.
                       AllReduceInPlace(buf, op, d);
                     } else {
                       collectives::ReduceOptions o;
                       Fill(o, buf, d);
                       o.root = root;
                       o.op = *herd_op;
                       Check(collectives::Reduce(o));
                     }
                     if (!buf.is_same(t)) t.copy_(buf);
                   });
  }

  c10::intrusive_ptr<::c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                             std::vector<at::Tensor>& inputs,
                                             const ::c10d::AllgatherOptions& opts) override {
    TORCH_CHECK(inputs.size() == 1 && outputs.size() == 1,
                "herd: allgather takes one input tensor and one output list");
    const at::Tensor in = inputs[0];
    CheckDense("allgather", in);
    std::vector<at::Tensor> outs = outputs[0];
    TORCH_CHECK(static_cast<int>(outs.size()) == size_, "herd: allgather needs ", size_,
                " output tensors (one per rank), got ", outs.size());
    for (const at::Tensor& o : outs) {
      TORCH_CHECK(o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
                  "herd: allgather: every output tensor must have the input's size and dtype (",
                  Shape(in), "), got ", Shape(o));
    }
    return Enqueue(
        OpType::ALLGATHER, "herd:all_gather", outs, inputs, Call("allgather", Shape(in)),
        opts.timeout, [=, this](Deadline d) {
          at::Tensor flat = staging_.Take(size_ * in.numel(), in.options());
          flat.narrow(0, rank_ * in.numel(), in.numel()).copy_(in.reshape({-1}));
          AllGatherInPlace(flat, d);
          for (int r = 0; r < size_; ++r) {
            outs[r].copy_(flat.narrow(0, r * in.numel(), in.numel()).view(outs[r].sizes()));
          }
        });
  }

  c10::intrusive_ptr<::c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                   const ::c10d::AllgatherOptions& opts) override {
    CheckDense("_allgather_base", input);
    CheckDense("_allgather_base", output);
    TORCH_CHECK(
        output.numel() == size_ * input.numel() && output.scalar_type() == input.scalar_type(),
        "herd: _allgather_base: the output must hold ", size_, " x the input (", Shape(input),
        "), got ", Shape(output));
    const at::Tensor in = input, out = output;
    return Enqueue(OpType::_ALLGATHER_BASE, "herd:_all_gather_base", {out}, {in},
                   Call("_allgather_base", Shape(in)), opts.timeout, [=, this](Deadline d) {
                     at::Tensor flat = out.is_contiguous()
                                           ? out.view({-1})
                                           : at::empty({out.numel()}, out.options());
                     flat.narrow(0, rank_ * in.numel(), in.numel()).copy_(in.reshape({-1}));
                     AllGatherInPlace(flat, d);
                     if (!out.is_contiguous()) out.copy_(flat.view(out.sizes()));
                   });
  }

  c10::intrusive_ptr<::c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs,
      const ::c10d::AllgatherOptions& opts) override {
    CheckList("allgather_coalesced", inputs, /*same_shape=*/false);
    TORCH_CHECK(static_cast<int>(output_lists.size()) == size_,
                "herd: allgather_coalesced needs one output list per rank (", size_, "), got ",
                output_lists.size());
    int64_t per_rank = 0;
    for (const at::Tensor& t : inputs) per_rank += t.numel();
    for (const auto& list : output_lists) {
      TORCH_CHECK(list.size() == inputs.size(),
                  "herd: allgather_coalesced: every output list must match the input list");
      for (size_t i = 0; i < list.size(); ++i) {
        TORCH_CHECK(list[i].numel() == inputs[i].numel() &&
                        list[i].scalar_type() == inputs[i].scalar_type(),
                    "herd: allgather_coalesced: output ", i, " is ", Shape(list[i]),
                    ", the input is ", Shape(inputs[i]));
      }
    }
    std::vector<at::Tensor> all_outputs;
    for (const auto& list : output_lists)
      all_outputs.insert(all_outputs.end(), list.begin(), list.end());
    return Enqueue(OpType::ALLGATHER_COALESCED, "herd:all_gather_coalesced", all_outputs, inputs,
                   Call("allgather_coalesced", Shapes(inputs)), opts.timeout,
                   [=, this](Deadline d) {
                     at::Tensor flat = staging_.Take(size_ * per_rank, inputs[0].options());
                     int64_t at = rank_ * per_rank;
                     for (const at::Tensor& t : inputs) {
                       flat.narrow(0, at, t.numel()).copy_(t.reshape({-1}));
                       at += t.numel();
                     }
                     AllGatherInPlace(flat, d);
                     for (int r = 0; r < size_; ++r) {
                       int64_t from = r * per_rank;
                       for (const at::Tensor& o : output_lists[r]) {
                         o.copy_(flat.narrow(0, from, o.numel()).view(o.sizes()));
                         from += o.numel();
                       }
                     }
                   });
  }

  c10::intrusive_ptr<::c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const ::c10d::GatherOptions& opts) override {
    const int root = static_cast<int>(opts.rootRank);
    CheckRoot("gather", root);
    TORCH_CHECK(inputs.size() == 1, "herd: gather takes one input tensor");
    const at::Tensor in = inputs[0];
    CheckDense("gather", in);
    std::vector<at::Tensor> outs;
    if (rank_ == root) {
      TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
                  "herd: gather: the root needs one output list of ", size_, " tensors");
      outs = outputs[0];
      for (const at::Tensor& o : outs) {
        TORCH_CHECK(o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
                    "herd: gather: the outputs must match the input (", Shape(in), "), got ",
                    Shape(o));
      }
    } else {
      TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                  "herd: gather: only the root passes output tensors");
    }
    return Enqueue(OpType::GATHER, "herd:gather", outs, inputs,
                   Call(absl::StrFormat("gather(root %d)", root), Shape(in)), opts.timeout,
                   [=, this](Deadline d, uint64_t seq) {
                     const transport::Tag tag = UserTag(UserStep::kGather, seq);
                     transport::Communicator& comm = *group_->comm;
                     at::Tensor src = in.contiguous();
                     if (rank_ != root) {
                       transport::Request req = comm.isend(root, tag, Bytes(src));
                       Check(comm.WaitAll({&req}, d));
                       return;
                     }
                     std::vector<at::Tensor> bufs(size_);
                     std::vector<transport::Request> reqs(size_);
                     for (int r = 0; r < size_; ++r) {
                       bufs[r] = outs[r].is_contiguous() ? outs[r] : at::empty_like(outs[r]);
                       if (r == rank_) {
                         bufs[r].view({-1}).copy_(src.view({-1}));
                       } else {
                         reqs[r] = comm.irecv(r, tag, MutBytes(bufs[r]));
                       }
                     }
                     Check(comm.WaitAll(absl::MakeSpan(reqs), d));
                     for (int r = 0; r < size_; ++r) {
                       if (!bufs[r].is_same(outs[r])) outs[r].copy_(bufs[r]);
                     }
                   });
  }

  c10::intrusive_ptr<::c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                           std::vector<std::vector<at::Tensor>>& inputs,
                                           const ::c10d::ScatterOptions& opts) override {
    const int root = static_cast<int>(opts.rootRank);
    CheckRoot("scatter", root);
    TORCH_CHECK(outputs.size() == 1, "herd: scatter takes one output tensor");
    const at::Tensor out = outputs[0];
    CheckDense("scatter", out);
    std::vector<at::Tensor> ins;
    if (rank_ == root) {
      TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                  "herd: scatter: the root needs one input list of ", size_, " tensors");
      ins = inputs[0];
      for (const at::Tensor& i : ins) {
        TORCH_CHECK(i.numel() == out.numel() && i.scalar_type() == out.scalar_type(),
                    "herd: scatter: the inputs must match the output (", Shape(out), "), got ",
                    Shape(i));
      }
    } else {
      TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                  "herd: scatter: only the root passes input tensors");
    }
    return Enqueue(OpType::SCATTER, "herd:scatter", outputs, ins,
                   Call(absl::StrFormat("scatter(root %d)", root), Shape(out)), opts.timeout,
                   [=, this](Deadline d, uint64_t seq) {
                     const transport::Tag tag = UserTag(UserStep::kScatter, seq);
                     transport::Communicator& comm = *group_->comm;
                     at::Tensor dst = out.is_contiguous() ? out : at::empty_like(out);
                     if (rank_ != root) {
                       transport::Request req = comm.irecv(root, tag, MutBytes(dst));
                       Check(comm.WaitAll({&req}, d));
                     } else {
                       std::vector<at::Tensor> srcs(size_);
                       std::vector<transport::Request> reqs(size_);
                       for (int r = 0; r < size_; ++r) {
                         srcs[r] = ins[r].contiguous();
                         if (r == rank_) {
                           dst.view({-1}).copy_(srcs[r].view({-1}));
                         } else {
                           reqs[r] = comm.isend(r, tag, Bytes(srcs[r]));
                         }
                       }
                       Check(comm.WaitAll(absl::MakeSpan(reqs), d));
                     }
                     if (!dst.is_same(out)) out.copy_(dst);
                   });
  }

  c10::intrusive_ptr<::c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const ::c10d::ReduceScatterOptions& opts) override {
    TORCH_CHECK(outputs.size() == 1 && inputs.size() == 1,
                "herd: reduce_scatter takes one output tensor and one input list");
    const at::Tensor out = outputs[0];
    CheckDense("reduce_scatter", out);
    std::vector<at::Tensor> ins = inputs[0];
    TORCH_CHECK(static_cast<int>(ins.size()) == size_, "herd: reduce_scatter needs ", size_,
                " input tensors (one per rank), got ", ins.size());
    for (const at::Tensor& i : ins) {
      TORCH_CHECK(i.numel() == out.numel() && i.scalar_type() == out.scalar_type(),
                  "herd: reduce_scatter: every input must match the output (", Shape(out),
                  "), got ", Shape(i));
    }
    const RedOp::RedOpType op = opts.reduceOp;
    CheckReduction(op, out.scalar_type());
    return Enqueue(OpType::REDUCE_SCATTER, "herd:reduce_scatter", outputs, ins,
                   Call("reduce_scatter(" + OpName(op) + ")", Shape(out)), opts.timeout,
                   [=, this](Deadline d) {
                     at::Tensor buf = Concatenated(ins);
                     ReduceScatterInPlace(buf, op, d);
                     out.copy_(buf.narrow(0, rank_ * out.numel(), out.numel()).view(out.sizes()));
                   });
  }

  c10::intrusive_ptr<::c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const ::c10d::ReduceScatterOptions& opts) override {
    CheckDense("_reduce_scatter_base", input);
    CheckDense("_reduce_scatter_base", output);
    TORCH_CHECK(
        input.numel() == size_ * output.numel() && output.scalar_type() == input.scalar_type(),
        "herd: _reduce_scatter_base: the input must hold ", size_, " x the output (", Shape(output),
        "), got ", Shape(input));
    const RedOp::RedOpType op = opts.reduceOp;
    CheckReduction(op, output.scalar_type());
    const at::Tensor in = input, out = output;
    return Enqueue(OpType::_REDUCE_SCATTER_BASE, "herd:_reduce_scatter_base", {out}, {in},
                   Call("_reduce_scatter_base(" + OpName(op) + ")", Shape(in)), opts.timeout,
                   [=, this](Deadline d) {
                     // herd's reduce-scatter works in place; torch's input stays as it was.
                     at::Tensor buf = staging_.Take(in.numel(), in.options());
                     buf.copy_(in.reshape({-1}));
                     ReduceScatterInPlace(buf, op, d);
                     out.copy_(buf.narrow(0, rank_ * out.numel(), out.numel()).view(out.sizes()));
                   });
  }

  c10::intrusive_ptr<::c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                                 std::vector<int64_t>& output_splits,
                                                 std::vector<int64_t>& input_splits,
                                                 const ::c10d::AllToAllOptions& opts) override {
    CheckDense("alltoall_base", input);
    CheckDense("alltoall_base", output);
    TORCH_CHECK(input.scalar_type() == output.scalar_type(),
                "herd: alltoall_base: input and output dtypes differ");
    const std::vector<int64_t> in_rows = Splits("input", input, input_splits);
    const std::vector<int64_t> out_rows = Splits("output", output, output_splits);
    const at::Tensor in = input, out = output;
    const bool even = input_splits.empty() && output_splits.empty();
    return Enqueue(
        OpType::ALLTOALL_BASE, "herd:all_to_all", {out}, {in},
        Call("alltoall_base", TypeName(in.scalar_type()),
             even ? ""
                  : absl::StrFormat("splits in [%s] out [%s]", absl::StrJoin(in_rows, ", "),
                                    absl::StrJoin(out_rows, ", "))),
        opts.timeout, [=, this](Deadline d, uint64_t seq) {
          at::Tensor src = in.contiguous();
          at::Tensor dst = out.is_contiguous() ? out : at::empty_like(out);
          if (even && in.numel() % size_ == 0 && in.numel() == out.numel() &&
              HerdType(in.scalar_type())) {
            collectives::AllToAllOptions o;
            o.comm = group_->comm.get();
            o.dtype = *HerdType(in.scalar_type());
            o.tag = static_cast<uint32_t>(seq & transport::Tag::kMaxId);
            o.timeout = Left(d);
            o.input = Data(src);
            o.output = Data(dst);
            o.count = static_cast<size_t>(in.numel());
            Check(collectives::PairwiseAllToAll(o));
          } else {
            std::vector<at::Tensor> sends, recvs;
            int64_t a = 0, b = 0;
            for (int r = 0; r < size_; ++r) {
              sends.push_back(src.narrow(0, a, in_rows[r]));
              recvs.push_back(dst.narrow(0, b, out_rows[r]));
              a += in_rows[r];
              b += out_rows[r];
            }
            Exchange(sends, recvs, seq, d);
          }
          if (!dst.is_same(out)) out.copy_(dst);
        });
  }

  c10::intrusive_ptr<::c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                            std::vector<at::Tensor>& inputs,
                                            const ::c10d::AllToAllOptions& opts) override {
    TORCH_CHECK(
        static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
        "herd: alltoall needs ", size_, " input and ", size_, " output tensors");
    for (const at::Tensor& t : inputs) CheckDense("alltoall", t);
    for (const at::Tensor& t : outputs) CheckDense("alltoall", t);
    return Enqueue(
        OpType::ALLTOALL, "herd:all_to_all", outputs, inputs,
        Call("alltoall", TypeName(inputs[0].scalar_type()),
             absl::StrFormat("in %s out %s", Shapes(inputs), Shapes(outputs))),
        opts.timeout, [=, this](Deadline d, uint64_t seq) {
          std::vector<at::Tensor> sends, recvs;
          for (int r = 0; r < size_; ++r) {
            sends.push_back(inputs[r].contiguous());
            recvs.push_back(outputs[r].is_contiguous() ? outputs[r] : at::empty_like(outputs[r]));
          }
          Exchange(sends, recvs, seq, d);
          for (int r = 0; r < size_; ++r) {
            if (!recvs[r].is_same(outputs[r])) outputs[r].copy_(recvs[r]);
          }
        });
  }

  c10::intrusive_ptr<::c10d::Work> barrier(const ::c10d::BarrierOptions& opts) override {
    // The call descriptors' exchange is the barrier.
    return Enqueue(OpType::BARRIER, "herd:barrier", {}, {}, Call("barrier", ""), opts.timeout,
                   [](Deadline) {});
  }

  // gloo's monitored barrier, on the calling thread: every rank reports to rank 0, which waits
  // for each (in rank order) by the timeout and names the first that did not come (every one
  // with wait_all_ranks), then releases them. A receive that timed out stays posted (its
  // buffer kept with the group): the group is not aborted by a failed monitored barrier.
  void monitoredBarrier(const ::c10d::BarrierOptions& opts, bool wait_all_ranks) override {
    const auto timeout = opts.timeout == ::c10d::kUnsetTimeout ? timeout_ : opts.timeout;
    const Deadline deadline = Deadline::After(timeout);
    const long long ms = timeout.count();
    transport::Communicator& comm = *group_->comm;
    uint64_t id;
    {
      std::lock_guard<std::mutex> lock(mu_);
      id = monitored_++;
    }
    const transport::Tag tag = UserTag(UserStep::kMonitoredBarrier, id);
    auto keep = [&](std::shared_ptr<Group::Stray> s) {
      std::lock_guard<std::mutex> lock(group_->strays_mu);
      group_->leftovers.push_back(std::move(s));
    };
    if (rank_ != 0) {
      auto s = std::make_shared<Group::Stray>();
      s->buffer = at::zeros({1}, at::kByte);
      transport::Request sent = comm.isend(0, tag, Bytes(s->buffer));
      s->request = comm.irecv(0, tag, MutBytes(s->buffer));
      absl::Status st = comm.wait(sent, deadline);
      if (st.ok()) st = comm.wait(s->request, deadline);
      if (!st.ok()) {
        keep(s);
        throw std::runtime_error(absl::StrFormat(
            "herd: Rank %d successfully reached monitoredBarrier, but received errors while "
            "waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank (%s)",
            rank_, st.message()));
      }
      return;
    }
    if (deadline.expired()) {
      throw std::runtime_error(
          absl::StrFormat("herd: Rank 0 timed out in monitoredBarrier after %d ms", ms));
    }
    std::vector<std::shared_ptr<Group::Stray>> arrived(size_);
    for (int r = 1; r < size_; ++r) {
      arrived[r] = std::make_shared<Group::Stray>();
      arrived[r]->buffer = at::zeros({1}, at::kByte);
      arrived[r]->request = comm.irecv(r, tag, MutBytes(arrived[r]->buffer));
    }
    std::vector<int> failed;
    for (int r = 1; r < size_; ++r) {
      if (!failed.empty() && !wait_all_ranks) {
        keep(arrived[r]);
        continue;
      }
      if (!comm.wait(arrived[r]->request, deadline).ok()) {
        keep(arrived[r]);
        failed.push_back(r);
      }
    }
    if (!failed.empty()) {
      throw std::runtime_error(
          absl::StrFormat("herd: %s %s failed to pass monitoredBarrier in %d ms",
                          failed.size() == 1 ? "Rank" : "Ranks", absl::StrJoin(failed, ", "), ms));
    }
    std::vector<transport::Request> acks;
    for (int r = 1; r < size_; ++r) acks.push_back(comm.isend(r, tag, Bytes(arrived[r]->buffer)));
    Check(comm.WaitAll(absl::MakeSpan(acks), deadline));
  }

  void setSequenceNumberForGroup() override {}  // every rank's group starts at call 0
  uint64_t getSequenceNumberForGroup() override {
    std::lock_guard<std::mutex> lock(mu_);
    return seq_;
  }

  // ---- point to point ----

  c10::intrusive_ptr<::c10d::Work> send(std::vector<at::Tensor>& tensors, int dst,
                                        int tag) override {
    TORCH_CHECK(tensors.size() == 1, "herd: send takes one tensor");
    CheckPeer("send", dst);
    CheckDense("send", tensors[0]);
    at::Tensor src = tensors[0].contiguous();
    auto group = group_;
    auto req = std::make_shared<transport::Request>(
        group->comm->isend(dst, UserTag(UserStep::kSendRecv, tag), Bytes(src)));
    return c10::make_intrusive<P2PWork>(
        group, rank_, OpType::SEND, "herd:send", src, at::Tensor(),
        [group, req](Deadline d, int&) { return group->comm->wait(*req, d); }, timeout_);
  }

  c10::intrusive_ptr<::c10d::Work> recv(std::vector<at::Tensor>& tensors, int src,
                                        int tag) override {
    TORCH_CHECK(tensors.size() == 1, "herd: recv takes one tensor");
    CheckPeer("recv", src);
    CheckDense("recv", tensors[0]);
    const at::Tensor t = tensors[0];
    auto group = group_;
    std::shared_ptr<Group::Stray> stray = TakeStray(src, tag);
    at::Tensor staging;
    std::shared_ptr<transport::Request> req;
    if (stray) {
      staging = stray->buffer.view(t.scalar_type()).view(t.sizes());
      req = std::shared_ptr<transport::Request>(stray, &stray->request);
    } else {
      staging = t.is_contiguous() ? at::Tensor() : at::empty_like(t, at::MemoryFormat::Contiguous);
      const at::Tensor& into = staging.defined() ? staging : t;
      req = std::make_shared<transport::Request>(
          group->comm->irecv(src, UserTag(UserStep::kSendRecv, tag), MutBytes(into)));
    }
    return c10::make_intrusive<P2PWork>(
        group, rank_, OpType::RECV, "herd:recv", t, staging,
        [group, req, stray, src](Deadline d, int& source) {
          source = src;
          return group->comm->wait(*req, d);
        },
        timeout_);
  }

  c10::intrusive_ptr<::c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                                 int tag) override {
    TORCH_CHECK(tensors.size() == 1, "herd: recv takes one tensor");
    const at::Tensor t = tensors[0];
    CheckDense("recv", t);
    auto group = group_;
    // A receive on every peer (unless one is kept from an earlier anysource receive); the
    // first to arrive wins, the others stay for the next receive of their (peer, tag).
    {
      std::lock_guard<std::mutex> lock(group->strays_mu);
      for (int r = 0; r < size_; ++r) {
        if (r == rank_) continue;
        auto& kept = group->strays[{r, tag}];
        if (!kept.empty()) continue;
        auto s = std::make_shared<Group::Stray>();
        s->buffer = at::empty({t.numel() * static_cast<int64_t>(t.element_size())},
                              t.options().dtype(at::kByte));
        s->request = group->comm->irecv(r, UserTag(UserStep::kSendRecv, tag), MutBytes(s->buffer));
        kept.push_back(s);
      }
    }
    const int me = rank_, p = size_;
    return c10::make_intrusive<P2PWork>(
        group, rank_, OpType::RECVANYSOURCE, "herd:recvAnySource", t, at::Tensor(),
        [group, t, tag, me, p](Deadline d, int& source) -> absl::Status {
          for (;;) {
            for (int r = 0; r < p; ++r) {
              if (r == me) continue;
              std::shared_ptr<Group::Stray> s;
              {
                std::lock_guard<std::mutex> lock(group->strays_mu);
                auto& kept = group->strays[{r, tag}];
                if (kept.empty()) continue;
                absl::Status st = group->comm->wait(kept.front()->request, Deadline::After(1ms));
                if (absl::IsDeadlineExceeded(st)) {
                  if (d.expired()) return st;
                  continue;
                }
                s = kept.front();
                kept.pop_front();
                if (!st.ok()) return st;
              }
              t.view({-1}).copy_(s->buffer.view(t.scalar_type()).view({-1}));
              source = r;
              return absl::OkStatus();
            }
            if (d.expired()) {
              return absl::DeadlineExceededError("recv from any source: nothing arrived in time");
            }
          }
        },
        timeout_);
  }

 private:
  using Run = std::function<void(Deadline, uint64_t)>;
  struct Task {
    c10::intrusive_ptr<HerdWork> work;
    CallDescriptor call;
    Run run;
    std::chrono::milliseconds timeout;
  };

  static CallDescriptor Call(std::string op, std::string signature, std::string specific = "") {
    CallDescriptor c;
    c.op = std::move(op);
    c.signature = std::move(signature);
    c.rank_specific = std::move(specific);
    return c;
  }

  c10::intrusive_ptr<::c10d::Work> Enqueue(OpType type, const char* title,
                                           std::vector<at::Tensor> outputs,
                                           std::vector<at::Tensor> inputs, CallDescriptor call,
                                           std::chrono::milliseconds timeout,
                                           std::function<void(Deadline)> run) {
    return Enqueue(type, title, std::move(outputs), std::move(inputs), std::move(call), timeout,
                   Run([run = std::move(run)](Deadline d, uint64_t) { run(d); }));
  }

  c10::intrusive_ptr<::c10d::Work> Enqueue(OpType type, const char* title,
                                           std::vector<at::Tensor> outputs,
                                           std::vector<at::Tensor> inputs, CallDescriptor call,
                                           std::chrono::milliseconds timeout, Run run) {
    auto work = c10::make_intrusive<HerdWork>(rank_, type, title, std::move(outputs),
                                              c10::optional<std::vector<at::Tensor>>(inputs));
    {
      std::lock_guard<std::mutex> lock(mu_);
      call.seq = seq_++;
      queue_.push_back({work, std::move(call), std::move(run),
                        timeout == ::c10d::kUnsetTimeout ? timeout_ : timeout});
    }
    cv_.notify_all();
    return work;
  }

  void Loop() {
    for (;;) {
      Task task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
        running_ = true;
      }
      std::exception_ptr error;
      try {
        const Deadline deadline = Deadline::After(task.timeout);
        Check(Broken());
        if (check_calls_ || task.call.op == "barrier") {
          Check(ExchangeDescriptors(*group_->comm, task.call, last_calls_, deadline, group_->name));
        }
        task.run(deadline, task.call.seq);
      } catch (...) {
        error = std::current_exception();
      }
      task.work->Complete(error);
      std::lock_guard<std::mutex> lock(mu_);
      running_ = false;
    }
  }

  void Watch() {
    if (!liveness_) return;
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, 100ms, [&] { return stop_; });
      if (stop_) break;
      lock.unlock();
      absl::Status st = liveness_->Check();
      if (!st.ok()) {
        (void)group_->comm->abort(st);
        lock.lock();
        break;  // the communicator is aborted for good
      }
      lock.lock();
    }
  }

  // The communicator's abort, as every later call reports it.
  absl::Status Broken() const {
    absl::Status st = group_->comm->status();
    if (st.ok()) return st;
    return absl::Status(st.code(),
                        absl::StrFormat("%s is unusable: %s", group_->name, st.message()));
  }

  std::chrono::milliseconds Left(Deadline d) const {
    return std::max(std::chrono::duration_cast<std::chrono::milliseconds>(d.remaining()), 1ms);
  }

  template <typename O>
  void Fill(O& o, const at::Tensor& buf, Deadline d, std::optional<DType> as = std::nullopt) {
    o.comm = group_->comm.get();
    o.timeout = Left(d);
    o.data = Data(buf);
    if (as) {
      o.dtype = *as;
      o.count = static_cast<size_t>(buf.numel());
    } else if (auto t = HerdType(buf.scalar_type())) {
      o.dtype = *t;
      o.count = static_cast<size_t>(buf.numel());
    } else {  // copies only: the bytes
      o.dtype = DType::kUInt8;
      o.count = static_cast<size_t>(buf.numel() * buf.element_size());
    }
  }

  // Several tensors of one call (the multi-device form): reduced into the first, locally.
  static at::Tensor LocalSum(const std::vector<at::Tensor>& tensors, RedOp::RedOpType op) {
    at::Tensor buf = tensors[0].is_contiguous() ? tensors[0] : tensors[0].contiguous();
    if (tensors.size() == 1) return buf;
    at::Tensor stacked = at::stack(tensors);
    buf.copy_(Fold(stacked, op == RedOp::AVG ? RedOp::SUM : op, buf.scalar_type()));
    if (op == RedOp::AVG) buf.div_(static_cast<double>(tensors.size()));
    return buf;
  }

  void AllReduceInPlace(const at::Tensor& buf, RedOp::RedOpType op, Deadline d) {
    if (std::optional<ReduceOp> herd_op = HerdReduce(op, buf.scalar_type())) {
      collectives::AllReduceOptions o;
      Fill(o, buf, d);
      o.op = *herd_op;
      Check(collectives::AllReduce(o));
      return;
    }
    // Gathered with herd's all-gather, folded with torch (the same result on every rank).
    at::Tensor all = at::empty({size_, buf.numel()}, buf.options());
    all[rank_].copy_(buf.view({-1}));
    AllGatherInPlace(all, d);
    buf.view({-1}).copy_(Fold(all, op, buf.scalar_type()));
  }

  // The tensors end to end in the staging buffer (one dtype: CheckList).
  at::Tensor Concatenated(const std::vector<at::Tensor>& tensors) {
    int64_t total = 0;
    for (const at::Tensor& t : tensors) total += t.numel();
    at::Tensor buf = staging_.Take(total, tensors[0].options());
    int64_t at = 0;
    for (const at::Tensor& t : tensors) {
      buf.narrow(0, at, t.numel()).copy_(t.reshape({-1}));
      at += t.numel();
    }
    return buf;
  }

  void AllGatherInPlace(const at::Tensor& flat, Deadline d) {
    collectives::AllGatherOptions o;
    Fill(o, flat, d);
    Check(collectives::AllGather(o));
  }

  // `buf` holds P equal chunks; chunk rank_ ends up reduced.
  void ReduceScatterInPlace(const at::Tensor& buf, RedOp::RedOpType op, Deadline d) {
    if (std::optional<ReduceOp> herd_op = HerdReduce(op, buf.scalar_type())) {
      collectives::ReduceScatterOptions o;
      Fill(o, buf, d);
      o.op = *herd_op;
      Check(collectives::ReduceScatter(o));
      return;
    }
    AllReduceInPlace(buf, op, d);
  }

  // Sparse all-reduce (gloo's way): every rank's coalesced indices and values gathered, summed.
  void SparseAllReduce(const std::vector<at::Tensor>& tensors, RedOp::RedOpType op, Deadline d) {
    TORCH_CHECK(op == RedOp::SUM, "herd: sparse allreduce supports ReduceOp.SUM only, got ",
                OpName(op));
    TORCH_CHECK(tensors.size() == 1, "herd: sparse allreduce takes one tensor");
    at::Tensor in = tensors[0].coalesce();
    at::Tensor nnz = at::empty({size_}, at::kLong);
    nnz[rank_] = in._nnz();
    AllGatherInPlace(nnz, d);
    const int64_t most = nnz.max().item<int64_t>();
    const int64_t dims = in.sparse_dim();
    at::Tensor idx = at::zeros({size_, dims, most}, at::kLong);
    at::Tensor val_shape_probe = in._values();
    std::vector<int64_t> vshape = {size_, most};
    for (int64_t i = 1; i < val_shape_probe.dim(); ++i) vshape.push_back(val_shape_probe.size(i));
    at::Tensor vals = at::zeros(vshape, val_shape_probe.options());
    idx[rank_].narrow(1, 0, in._nnz()).copy_(in._indices());
    vals[rank_].narrow(0, 0, in._nnz()).copy_(in._values());
    AllGatherInPlace(idx, d);
    AllGatherInPlace(vals, d);
    at::Tensor sum;
    for (int r = 0; r < size_; ++r) {
      const int64_t n = nnz[r].item<int64_t>();
      at::Tensor part = at::sparse_coo_tensor(idx[r].narrow(1, 0, n), vals[r].narrow(0, 0, n),
                                              in.sizes(), in.options());
      sum = sum.defined() ? sum + part : part;
    }
    tensors[0].copy_(sum.coalesce());
  }

  // Every rank sends sends[r] to r and receives recvs[r] from r (uneven all-to-all).
  void Exchange(const std::vector<at::Tensor>& sends, const std::vector<at::Tensor>& recvs,
                uint64_t seq, Deadline d) {
    transport::Communicator& comm = *group_->comm;
    const transport::Tag tag = UserTag(UserStep::kAllToAll, seq);
    std::vector<transport::Request> reqs;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) {
        recvs[r].copy_(sends[r]);
        continue;
      }
      reqs.push_back(comm.irecv(r, tag, MutBytes(recvs[r])));
    }
    for (int r = 0; r < size_; ++r) {
      if (r != rank_) reqs.push_back(comm.isend(r, tag, Bytes(sends[r])));
    }
    Check(comm.WaitAll(absl::MakeSpan(reqs), d));
  }

  std::vector<int64_t> Splits(const char* what, const at::Tensor& t,
                              const std::vector<int64_t>& splits) const {
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    if (splits.empty()) {
      TORCH_CHECK(rows % size_ == 0, "herd: alltoall_base: the ", what, "'s first dimension (",
                  rows, ") does not divide into ", size_, " ranks; give split sizes");
      return std::vector<int64_t>(size_, rows / size_);
    }
    TORCH_CHECK(static_cast<int>(splits.size()) == size_, "herd: alltoall_base: ", size_, " ", what,
                " split sizes needed, got ", splits.size());
    int64_t sum = 0;
    for (int64_t s : splits) sum += s;
    TORCH_CHECK(sum == rows, "herd: alltoall_base: the ", what, " split sizes add up to ", sum,
                ", not the first dimension ", rows);
    return splits;
  }

  static ConstBytes Bytes(const at::Tensor& t) {
    return AsBytes(t.data_ptr(), static_cast<size_t>(t.numel() * t.element_size()));
  }
  static MutableBytes MutBytes(const at::Tensor& t) {
    return AsMutableBytes(t.data_ptr(), static_cast<size_t>(t.numel() * t.element_size()));
  }

  std::shared_ptr<Group::Stray> TakeStray(int src, int tag) {
    std::lock_guard<std::mutex> lock(group_->strays_mu);
    auto it = group_->strays.find({src, tag});
    if (it == group_->strays.end() || it->second.empty()) return nullptr;
    auto s = it->second.front();
    it->second.pop_front();
    return s;
  }

  void CheckDense(const char* what, const at::Tensor& t) const {
    TORCH_CHECK(t.defined(), "herd: ", what, ": undefined tensor");
    TORCH_CHECK(t.layout() == at::kStrided, "herd: ", what, " takes dense tensors, got ", Shape(t));
    TORCH_CHECK(t.device().is_cpu(), "herd: ", what, ": ", Shape(t),
                " is not in host memory; this torch has no CUDA, and herd's NCCL path needs "
                "a CUDA build of torch");
  }
  void CheckTensors(const char* what, const std::vector<at::Tensor>& ts) const {
    TORCH_CHECK(!ts.empty(), "herd: ", what, ": the tensor list is empty");
    for (const at::Tensor& t : ts) {
      TORCH_CHECK(t.defined(), "herd: ", what, ": undefined tensor");
      TORCH_CHECK(t.device().is_cpu(), "herd: ", what, ": ", Shape(t),
                  " is not in host memory; this torch has no CUDA, and herd's NCCL path needs a "
                  "CUDA build of torch");
      TORCH_CHECK(t.scalar_type() == ts[0].scalar_type() && t.sizes() == ts[0].sizes() &&
                      t.layout() == ts[0].layout(),
                  "herd: ", what, ": the tensors of one call must match: ", Shapes(ts));
    }
  }
  void CheckList(const char* what, const std::vector<at::Tensor>& ts, bool same_shape) const {
    TORCH_CHECK(!ts.empty(), "herd: ", what, ": the tensor list is empty");
    for (const at::Tensor& t : ts) {
      CheckDense(what, t);
      TORCH_CHECK(t.scalar_type() == ts[0].scalar_type(), "herd: ", what,
                  ": the tensors of one call must share a dtype: ", Shapes(ts));
      TORCH_CHECK(!same_shape || t.sizes() == ts[0].sizes(), "herd: ", what,
                  ": the tensors must have one shape: ", Shapes(ts));
    }
  }
  void CheckRoot(const char* what, int root) const {
    TORCH_CHECK(root >= 0 && root < size_, "herd: ", what, ": root ", root,
                " is not a rank of the group (0..", size_ - 1, ")");
  }
  void CheckPeer(const char* what, int peer) const {
    TORCH_CHECK(peer >= 0 && peer < size_ && peer != rank_, "herd: ", what, ": rank ", peer,
                " is not another rank of the group (0..", size_ - 1, ", this is ", rank_, ")");
  }

  std::shared_ptr<Group> group_;
  const std::chrono::milliseconds timeout_;
  const bool check_calls_;
  std::unique_ptr<Liveness> liveness_;
  std::vector<CallDescriptor> last_calls_;  // the worker thread's
  Staging staging_;                         // the worker thread's

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  uint64_t seq_ = 0;
  uint64_t monitored_ = 0;  // monitored barriers so far
  bool stop_ = false;
  bool running_ = false;
  std::thread worker_, watchdog_;
};

// A per-process count of the groups created under each name: a group made again under the
// same name (destroy_process_group, then init_process_group on the same store) bootstraps
// under fresh keys.
int NextInstance(const std::string& key) {
  static std::mutex mu;
  static std::map<std::string, int> counts;
  std::lock_guard<std::mutex> lock(mu);
  return counts[key]++;
}

}  // namespace

py::object CreateProcessGroup(py::handle store_handle, const GroupSetup& setup) {
  auto store = store_handle.cast<c10::intrusive_ptr<::c10d::Store>>();
  TORCH_CHECK(setup.size >= 1 && setup.rank >= 0 && setup.rank < setup.size, "herd: rank ",
              setup.rank, " of ", setup.size, " is not a rank of the group");
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(setup.timeout_s * 1000));
  std::shared_ptr<transport::Store> bootstrap;
  std::string prefix;
  if (setup.session_store) {
    TORCH_CHECK(setup.session != nullptr, "herd: no herd session to bootstrap through");
    bootstrap = std::shared_ptr<transport::Store>(setup.session, &setup.session->store());
    prefix =
        absl::StrFormat("c10d/%s/%d", setup.group_id, NextInstance("session/" + setup.group_id));
  } else {
    bootstrap = std::make_shared<C10dStore>(store);
    prefix = absl::StrFormat("herd/%d", NextInstance("store/" + setup.group_id));
  }
  absl::StatusOr<std::unique_ptr<transport::Communicator>> comm;
  {
    py::gil_scoped_release release;
    transport::ConnectOptions o;
    o.kind = transport::Backend::kUcx;
    o.rank = setup.rank;
    o.size = setup.size;
    o.store = bootstrap;
    o.prefix = prefix;
    o.bootstrap_timeout = timeout;
    comm = transport::Connect(o);
  }
  if (!comm.ok()) {
    Throw(absl::Status(
        comm.status().code(),
        absl::StrFormat("process group '%s' (rank %d of %d) could not connect: %s", setup.group_id,
                        setup.rank, setup.size, comm.status().message())));
  }
  std::unique_ptr<Liveness> liveness;
  if (setup.session != nullptr) {
    liveness = std::make_unique<JobLiveness>(setup.session);
  } else if (setup.size > 1) {
    liveness = std::make_unique<StoreHeartbeat>(
        store, setup.rank, setup.size,
        std::chrono::milliseconds(static_cast<int64_t>(setup.heartbeat_timeout_s * 1000)));
  }
  c10::intrusive_ptr<BackendBase> pg =
      c10::make_intrusive<ProcessGroupHerd>(setup, *std::move(comm), std::move(liveness));
  return py::cast(pg);
}

}  // namespace herd::python::c10d_backend
