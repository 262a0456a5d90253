// The order of a worker's start-up (worker/runtime.h): the built-in worker builds its model and
// reads its data before it registers with the job, so a worker joining a running elastic job
// is ready when the live workers begin to wait for it (docs/elastic.md, "Rejoin"). Checked
// against the real scheduler with RunWorker and a training program of the test's own (a
// least-squares model of eight values, stepped through the real executor): while the model
// is being built, the scheduler must not know the worker; a job's start still completes; a
// worker that cannot build its model still fails the job, naming why.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/status.h"
#include "scheduler/client/scheduler_client.h"
#include "tests/integration/scheduler/scheduler_process.h"
#include "worker/runtime.h"

namespace herd::worker {
namespace {

using namespace std::chrono_literals;
using scheduler::testing::RunHerd;
using scheduler::testing::SchedulerProcess;
namespace fs = std::filesystem;

constexpr int kValues = 8;
constexpr int kSamples = 64;

// Minimises |w - target|^2 / 2: the gradient is w - target, the update the executor's.
class LeastSquares final : public Trainable {
 public:
  LeastSquares() : w_(kValues, 0.0f) {
    tensors_.push_back({"w", w_.data(), w_.size()});
    herd::v1::TensorSpec spec;
    spec.set_name("w");
    spec.add_shape(kValues);
    spec.set_dtype("fp32");
    layout_.push_back(spec);
  }
  const std::vector<ModelTensor>& tensors() const override { return tensors_; }
  std::vector<herd::v1::TensorSpec> Layout() const override { return layout_; }
  int64_t TrainSamples() const override { return kSamples; }
  absl::StatusOr<StepStats> Step(Executor& executor, const DataPosition&,
                                 const BatchSlice& slice) override {
    HERD_RETURN_IF_ERROR(executor.BeforeForward(0));
    std::vector<float> grad(kValues);
    StepStats stats;
    for (int i = 0; i < kValues; ++i) {
      grad[i] = w_[i] - Target(i);
      stats.loss += 0.5 * grad[i] * grad[i];
    }
    HERD_RETURN_IF_ERROR(executor.GradientReady(0, grad));
    HERD_RETURN_IF_ERROR(executor.EndBackward());
    stats.samples = slice.count;
    return stats;
  }
  absl::StatusOr<double> Evaluate() override {
    double err = 0;
    for (int i = 0; i < kValues; ++i) err += std::abs(w_[i] - Target(i));
    return 1.0 / (1.0 + err);
  }

 private:
  static float Target(int i) { return static_cast<float>(i) - 3.5f; }
  std::vector<float> w_;
  std::vector<ModelTensor> tensors_;
  std::vector<herd::v1::TensorSpec> layout_;
};

class StartupOrder : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "herd-startup-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
    sched_.Start(dir_ + "/scheduler", 0, {"--heartbeat-timeout", "10s"});
    scheduler::ClientOptions o;
    o.address = sched_.address();
    o.call_timeout = 10s;
    auto client = scheduler::SchedulerClient::Connect(o);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // An allreduce job of one worker, SGD, 64 samples in batches of 8: 8 iterations.
  void Submit(const std::string& name) {
    const std::string path = dir_ + "/" + name + ".yaml";
    std::ofstream(path) << "name: " << name << "\nmode: allreduce\nworkers: 1\nservers: 0\n"
                        << "seed: 3\noptimizer: {name: sgd, learning_rate: 0.2}\n"
                        << "training: {model: mlp, epochs: 1, batch_size: 8}\n";
    auto submitted = RunHerd({"job", "submit", path, "--scheduler", sched_.address()});
    ASSERT_EQ(submitted.rc, 0) << submitted.out;
  }
  WorkerOptions Options(const std::string& job) {
    WorkerOptions o;
    o.session.scheduler.address = sched_.address();
    o.session.job = job;
    o.session.name = "solo";
    o.session.wait_for_job = 10s;
    o.session.start_timeout = 30s;
    o.session.timeout = 30s;
    return o;
  }
  // Whether the scheduler knows a worker named "solo" in `job` (registered, alive or not).
  bool Registered(const std::string& job) {
    auto status = client_->GetJob(job);
    EXPECT_TRUE(status.ok()) << status.status();
    if (!status.ok()) return true;
    for (const auto& w : status->workers()) {
      if (w.name() == "solo") return true;
    }
    return false;
  }

  std::string dir_;
  SchedulerProcess sched_;
  std::unique_ptr<scheduler::SchedulerClient> client_;
};

TEST_F(StartupOrder, TheModelIsBuiltBeforeTheWorkerRegistersAndTheJobCompletes) {
  Submit("order");
  std::atomic<int> calls{0};
  bool registered_while_building = true;
  auto factory = [&](const TrainableRequest& req) -> absl::StatusOr<std::unique_ptr<Trainable>> {
    ++calls;
    EXPECT_EQ(req.spec.name(), "order");
    EXPECT_EQ(req.world_size, 1);
    registered_while_building = Registered("order");
    return std::unique_ptr<Trainable>(new LeastSquares());
  };
  absl::StatusOr<herd::v1::TrainingResult> result = RunWorker(Options("order"), factory);
  ASSERT_TRUE(result.ok()) << result.status() << "\n" << sched_.log();
  EXPECT_EQ(calls.load(), 1);
  EXPECT_FALSE(registered_while_building) << "the worker registered before its model was built";
  EXPECT_EQ(result->iterations(), kSamples / 8);
  auto status = client_->GetJob("order");
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->state(), herd::v1::JOB_COMPLETED) << status->DebugString();
  // It learned: the updates went through the executor (at w = 0 the error sum is 16 and the
  // loss 21; eight SGD steps at 0.2 shrink both).
  EXPECT_GT(result->test_accuracy(), 1.0 / (1.0 + 16.0)) << result->DebugString();
  EXPECT_LT(result->final_loss(), 21.0) << result->DebugString();
}

TEST_F(StartupOrder, AWorkerThatCannotBuildItsModelStillFailsTheJobNamingWhy) {
  Submit("nodata");
  auto factory = [&](const TrainableRequest&) -> absl::StatusOr<std::unique_ptr<Trainable>> {
    EXPECT_FALSE(Registered("nodata"));
    return absl::NotFoundError("no training set in /nowhere");
  };
  absl::StatusOr<herd::v1::TrainingResult> result = RunWorker(Options("nodata"), factory);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(absl::IsNotFound(result.status())) << result.status();
  EXPECT_NE(result.status().message().find("/nowhere"), std::string::npos) << result.status();
  auto status = client_->GetJob("nodata");
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->state(), herd::v1::JOB_FAILED) << status->DebugString();
  EXPECT_NE(status->failure_reason().find("no training set in /nowhere"), std::string::npos)
      << status->DebugString();
}

}  // namespace
}  // namespace herd::worker
