#include "worker/runtime.h"

#include <google/protobuf/util/json_util.h>

#include <cstdio>
#include <fstream>
#include <limits>

#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status.h"
#include "common/timeline.h"
#include "worker/job_optimizer.h"

namespace herd::worker {
namespace {

using Seconds = std::chrono::duration<double>;

// The training of one worker, once its session registered with the job and `model` is built.
absl::StatusOr<herd::v1::TrainingResult> Train(Session& session, std::unique_ptr<Trainable> model,
                                               const std::string& loss_file) {
  const int world = session.world_size();
  const auto& training = session.spec().training();
  const int64_t samples_total = model->TrainSamples();
  const int batch = training.batch_size();
  // A resumed job continues at its checkpoint's iteration and data position (global, so it
  // holds at another worker count too).
  int64_t first = session.start_iteration();
  DataPosition at = session.start_position();
  HERD_RETURN_IF_ERROR(CheckPosition(at, samples_total, "the resumed checkpoint"));
  const int64_t left = IterationsLeft(at, samples_total, world, batch, training.epochs());
  // The resumed iteration is the checkpoint's (bounded by its check); still, never overflow.
  if (first < 0 || left > std::numeric_limits<int64_t>::max() - first) {
    return absl::DataLossError(absl::StrFormat(
        "the resumed checkpoint's iteration %d and the %d iterations left do not add up", first,
        left));
  }
  const int64_t total = first + left;
  // The job's optimizer with every field of its spec (AdamW, Adam's betas), not only those
  // Session::JobOptimizer reads.
  HERD_ASSIGN_OR_RETURN(optim::OptimizerConfig optimizer, OptimizerOfJob(session.spec()));
  session.SetOptimizer(std::move(optimizer));
  HERD_RETURN_IF_ERROR(session.Attach(model->tensors(), model->Layout(), total));
  // A worker that joined a running elastic job goes on where the live workers do, with the
  // state they handed it (docs/elastic.md, "Rejoin").
  first = session.start_iteration();
  at = session.start_position();
  HERD_RETURN_IF_ERROR(
      CheckPosition(at, samples_total, "the state handed over by the live workers"));
  // ps_async's joiner gets no position from a peer: its data moves on from the job's start.
  for (int64_t i = session.start_position_iteration(); i < first; ++i) {
    at = Advance(at, samples_total, world, batch);
  }
  model->set_timeline(&session.timeline());

  herd::v1::TrainingResult result;
  const auto begin = std::chrono::steady_clock::now();
  int64_t samples = 0;
  for (int64_t it = first;; ++it) {
    session.SetDataPosition(at);
    if (it == total) {
      // The final checkpoint (Finish) is at the data position past the last batch: a resume
      // from it has nothing left to train. Flush waits for dear's last all-gathers, which a
      // worker's death can interrupt like any collective: an elastic job goes on from its
      // last commit then.
      const absl::Status flushed = session.Flush();
      if (flushed.ok()) break;
      HERD_ASSIGN_OR_RETURN(Session::Rollback back, session.Recover(flushed));
      it = back.iteration - 1;
      at = back.position;
      continue;
    }
    absl::StatusOr<Executor*> begun = session.BeginIteration(it);
    if (!begun.ok() && session.preempted()) {
      // Stopped at the preemption checkpoint: nothing failed, `--resume` continues from it.
      HERD_RETURN_IF_ERROR(session.timeline().Write());
      result.set_iterations(it - first);
      result.set_test_accuracy(-1);
      (*result.mutable_metrics())["preempted_at_iteration"] = static_cast<double>(it);
      return result;
    }
    absl::StatusOr<StepStats> step;
    if (begun.ok()) {
      Timeline::Span span(&session.timeline(), absl::StrFormat("iteration %d", it),
                          Timeline::Lane::kControl);
      step = model->Step(**begun, at, session.DataSlice(batch));
    } else {
      step = begun.status();
    }
    if (!step.ok()) {
      // An elastic job that lost a worker goes on with the live ones from the last commit
      // (Session::Recover); any other error ends this worker, diagnosed.
      HERD_ASSIGN_OR_RETURN(Session::Rollback back, session.Recover(step.status()));
      it = back.iteration - 1;
      at = back.position;
      continue;
    }
    HERD_RETURN_IF_ERROR(session.EndIteration(*step));
    if (!loss_file.empty()) {
      // %a: the exact float, so two runs' losses compare bit for bit.
      std::ofstream(loss_file, std::ios::app) << absl::StrFormat("%d %a\n", it, step->loss);
    }
    samples += step->samples;
    result.set_final_loss(step->loss);
    at = Advance(at, samples_total, world, batch);
  }
  const double seconds = Seconds(std::chrono::steady_clock::now() - begin).count();
  result.set_iterations(total - first);
  result.set_train_seconds(seconds);
  result.set_samples_per_second(seconds > 0 ? static_cast<double>(samples) * world / seconds : 0);
  result.set_exposed_comm_seconds(session.exposed_comm_seconds());
  result.set_test_accuracy(-1);
  if (session.evaluates()) {
    Timeline::Span span(&session.timeline(), "evaluate", Timeline::Lane::kCompute);
    HERD_ASSIGN_OR_RETURN(double accuracy, model->Evaluate());
    result.set_test_accuracy(accuracy);
  }
  HERD_RETURN_IF_ERROR(session.Finish(result).status());
  return result;
}

absl::Status WriteResultFile(const std::string& path, const herd::v1::TrainingResult& result) {
  std::string json;
  google::protobuf::util::JsonPrintOptions opts;
  opts.always_print_primitive_fields = true;
  opts.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(result, &json, opts).ok()) {
    return absl::InternalError("cannot encode the result as JSON");
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << json << "\n";
    if (!out.flush()) return absl::InternalError("cannot write the result file " + path);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError("cannot write the result file " + path);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<herd::v1::TrainingResult> RunWorker(const WorkerOptions& options,
                                                   const TrainableFactory& make_trainable) {
  HERD_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Open(options.session));
  // The model and the data first, registered after: a worker that joins a running elastic job
  // is waited for by the live workers from its registration on, so its own start-up (seconds
  // of libtorch and the dataset on a loaded machine) must not fall in that wait
  // (docs/elastic.md, "Rejoin"). At a job's start it changes nothing: the job runs once every
  // worker registered and attached.
  const auto started = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<Trainable>> model =
      make_trainable({session->spec(), options.session.rank.value_or(-1), session->world_size()});
  if (!model.ok()) {
    // A worker that cannot build its model fails the job, naming itself, as any error of its
    // own does: it registers to say so.
    if (auto st = session->Register(); !st.ok()) return model.status();
    session->Fail(model.status());
    return model.status();
  }
  Log().info("worker '{}': model and data ready in {:.2f} s; registering", session->name(),
             Seconds(std::chrono::steady_clock::now() - started).count());
  HERD_RETURN_IF_ERROR(session->Register());
  absl::StatusOr<herd::v1::TrainingResult> result =
      Train(*session, *std::move(model), options.loss_file);
  if (!result.ok()) {
    // What the failed worker did up to its failure is worth keeping.
    if (auto st = session->timeline().Write(); !st.ok()) Log().warn("{}", st.ToString());
    const absl::Status why = session->Diagnose(result.status());
    session->Fail(why);  // nothing when the job's ending was the cause
    return why;
  }
  if (!options.result_file.empty()) {
    HERD_RETURN_IF_ERROR(WriteResultFile(options.result_file, *result));
  }
  return result;
}

}  // namespace herd::worker
