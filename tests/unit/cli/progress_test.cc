// The progress line of `herd local` (cli/local/progress.h) fed with JobStatus messages as the
// scheduler answers them: what it says while starting, training and evaluating, that it never
// shows a loss or a rate it does not have, and that its last line is printed once.
#include "cli/local/progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"

namespace herd::cli {
namespace {

using Clock = ProgressLine::Clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// What a ProgressLine writes, captured in memory.
class Captured {
 public:
  Captured() : file_(open_memstream(&buf_, &size_)) {}
  ~Captured() {
    std::fclose(file_);
    std::free(buf_);
  }
  std::FILE* file() { return file_; }
  std::string text() {
    std::fflush(file_);
    return std::string(buf_, size_);
  }
  // The lines of a log (newline-terminated).
  std::vector<std::string> lines() {
    std::vector<std::string> out = absl::StrSplit(text(), '\n');
    if (!out.empty() && out.back().empty()) out.pop_back();
    return out;
  }

 private:
  char* buf_ = nullptr;
  size_t size_ = 0;
  std::FILE* file_;
};

// A job of `workers` workers (batch 64, 2 epochs) and `servers` shards, as submitted.
herd::v1::JobStatus Submitted(int workers, int servers, const std::string& mode = "dear") {
  herd::v1::JobStatus job;
  job.mutable_spec()->set_name("j");
  job.mutable_spec()->set_workers(workers);
  job.mutable_spec()->set_servers(servers);
  job.mutable_spec()->mutable_mode()->set_mode(mode);
  job.mutable_spec()->mutable_training()->set_batch_size(64);
  job.mutable_spec()->mutable_training()->set_epochs(2);
  job.set_state(herd::v1::JOB_PENDING);
  for (int r = 0; r < workers; ++r) {
    job.add_workers()->set_rank(r);
    auto* p = job.add_progress();
    p->set_rank(r);
    p->set_iteration(-1);
  }
  for (int s = 0; s < servers; ++s) job.add_servers()->set_rank(s);
  auto* first = job.add_schedule();
  first->set_from_iteration(0);
  first->mutable_mode()->set_mode(mode);
  return job;
}

void Register(herd::v1::Member* m, const std::string& name) {
  m->set_name(name);
  m->set_alive(true);
}

// Every process registered, the layout declared (`planned` iterations), running.
herd::v1::JobStatus Running(int workers, int servers, int64_t planned) {
  auto job = Submitted(workers, servers);
  for (int r = 0; r < workers; ++r) Register(job.mutable_workers(r), "w" + std::to_string(r));
  for (int s = 0; s < servers; ++s) Register(job.mutable_servers(s), "s" + std::to_string(s));
  job.set_planned_iterations(planned);
  job.set_state(herd::v1::JOB_RUNNING);
  return job;
}

// Every worker completed `iteration` with `loss` (64 samples, 0.1 s of which 0.025 s waiting).
void Reached(herd::v1::JobStatus& job, int64_t iteration, double loss) {
  for (auto& p : *job.mutable_progress()) {
    p.set_iteration(iteration);
    p.mutable_stats()->set_loss(loss);
    p.mutable_stats()->set_samples(64);
    p.mutable_stats()->set_iteration_seconds(0.1);
    p.mutable_stats()->set_exposed_comm_seconds(0.025);
  }
}

class ProgressTest : public ::testing::Test {
 protected:
  Clock::time_point At(double s) {
    return begin_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  }
  Clock::time_point begin_ = Clock::now();
  Captured out_;
};

TEST_F(ProgressTest, StartingSaysWhoIsMissingThenWhatTheJobWaitsFor) {
  ProgressLine progress(/*tty=*/false, out_.file());
  auto job = Submitted(4, 1);
  progress.Update(job, begin_, At(0.5));
  Register(job.mutable_workers(0), "w0");
  Register(job.mutable_workers(2), "w2");
  progress.Update(job, begin_, At(1.2));
  for (int r = 0; r < 4; ++r) Register(job.mutable_workers(r), "w" + std::to_string(r));
  Register(job.mutable_servers(0), "s0");
  progress.Update(job, begin_, At(2));
  job.set_state(herd::v1::JOB_RUNNING);
  progress.Update(job, begin_, At(3));
  EXPECT_EQ(out_.lines(),
            (std::vector<std::string>{
                "starting: 0 of 4 workers and 0 of 1 server registered, 0 s",
                "starting: 2 of 4 workers and 0 of 1 server registered, 1 s",
                "starting: 4 workers and 1 server registered, loading the model and data, 2 s",
                "starting: every process is running, first iterations, 3 s",
            }));
}

TEST_F(ProgressTest, ALogPrintsAStartingStateOnceNotEveryLook) {
  ProgressLine progress(/*tty=*/false, out_.file());
  auto job = Submitted(2, 0);
  for (double t = 0; t < 10; t += 0.5) progress.Update(job, begin_, At(t));
  EXPECT_EQ(out_.lines(), (std::vector<std::string>{"starting: 0 of 2 workers registered, 0 s"}));
}

TEST_F(ProgressTest, NoTrainingLineUntilThereIsALossAndARate) {
  ProgressLine progress(/*tty=*/false, out_.file());
  auto job = Running(4, 0, 100);
  // One worker has completed an iteration, the others none: no loss of the job yet.
  job.mutable_progress(0)->set_iteration(0);
  job.mutable_progress(0)->mutable_stats()->set_loss(2.3);
  progress.Update(job, begin_, At(1));
  // Every worker has one, but the job was not yet seen to advance: no rate yet.
  Reached(job, 0, 2.3);
  progress.Update(job, begin_, At(1.5));
  progress.Update(job, begin_, At(2));
  const std::string text = out_.text();
  EXPECT_EQ(text.find("training"), std::string::npos) << text;
  EXPECT_EQ(text.find("loss"), std::string::npos) << text;
  EXPECT_EQ(text.find("samples/s"), std::string::npos) << text;

  // Seen to advance 20 iterations in 2.5 s: 20 x 4 workers x 64 samples / 2.5 s.
  Reached(job, 20, 0.75);
  progress.Update(job, begin_, At(4));
  EXPECT_EQ(out_.lines().back(),
            "training [dear] epoch 1/2  iter 21/100  loss 0.7500  2048 samples/s  comm 25%");
}

TEST_F(ProgressTest, TheTrainingLineFollowsTheSlowestLiveWorkerAndTheScheduledMode) {
  ProgressLine progress(/*tty=*/true, out_.file());
  auto job = Running(3, 1, 200);
  auto* sw = job.add_schedule();
  sw->set_from_iteration(120);
  sw->mutable_mode()->set_mode("ps_sync");
  Reached(job, 100, 0.5);
  progress.Update(job, begin_, At(1));
  Reached(job, 130, 0.5);
  job.mutable_progress(1)->set_iteration(125);  // the slowest
  job.mutable_progress(2)->set_iteration(3);    // dead: it does not hold the job back
  job.mutable_workers(2)->set_alive(false);
  progress.Update(job, begin_, At(2));
  // (125 - 100) iterations x 2 live workers x 64 samples in 1 s; the live workers' mean loss.
  EXPECT_NE(
      out_.text().find("\rtraining [ps_sync] epoch 2/2  iter 126/200  loss 0.5000  3200 samples/s"),
      std::string::npos)
      << out_.text();
}

TEST_F(ProgressTest, WithoutPlannedIterationsTheLineCountsIterationsOnly) {
  ProgressLine progress(/*tty=*/false, out_.file());
  auto job = Running(1, 0, /*planned=*/0);
  Reached(job, 9, 1.0);
  progress.Update(job, begin_, At(1));
  Reached(job, 19, 1.0);
  progress.Update(job, begin_, At(2));
  EXPECT_EQ(out_.lines().back(), "training [dear] iter 20  loss 1.0000  640 samples/s  comm 25%");
}

TEST_F(ProgressTest, ALogPrintsTrainingEveryFiveSecondsAndTheLastLineOnceBeforeEvaluating) {
  ProgressLine progress(/*tty=*/false, out_.file());
  auto job = Running(2, 0, 100);
  for (int i = 0; i <= 98; i += 2) {
    Reached(job, i, 1.0 - i / 200.0);
    progress.Update(job, begin_, At(i / 10.0));  // 10 iterations a second
  }
  // The last iteration, then rank 1 finishes while rank 0 evaluates.
  Reached(job, 99, 0.5);
  progress.Update(job, begin_, At(9.95));
  job.mutable_workers(1)->set_finished(true);
  progress.Update(job, begin_, At(10.5));
  progress.Update(job, begin_, At(11.5));
  progress.Finish();
  progress.Finish();
  const auto lines = out_.lines();
  ASSERT_EQ(lines.size(), 6u) << out_.text();
  // Starting until a second look gives a rate; the first training line, one 5 s later, the
  // final one, then each change while evaluating; Finish adds nothing (the last training line
  // is out).
  EXPECT_EQ(lines[0], "starting: every process is running, first iterations, 0 s");
  EXPECT_EQ(lines[1],
            "training [dear] epoch 1/2  iter 3/100  loss 0.9900  1280 samples/s  comm 25%");
  EXPECT_NE(lines[2].find("epoch 2/2  iter 53/100"), std::string::npos) << lines[2];
  EXPECT_NE(lines[3].find("epoch 2/2  iter 100/100  loss 0.5000"), std::string::npos) << lines[3];
  EXPECT_EQ(lines[4], "evaluating: rank 0 on the test set, 0 of 2 workers done, 0 s");
  EXPECT_EQ(lines[5], "evaluating: rank 0 on the test set, 1 of 2 workers done, 1 s");
}

TEST_F(ProgressTest, ATerminalEndsOnTheLastTrainingLineOnce) {
  ProgressLine progress(/*tty=*/true, out_.file());
  auto job = Running(2, 0, 10);
  Reached(job, 4, 1.0);
  progress.Update(job, begin_, At(1));
  Reached(job, 9, 0.25);
  progress.Update(job, begin_, At(2));
  job.mutable_workers(1)->set_finished(true);
  progress.Update(job, begin_, At(3));
  job.set_state(herd::v1::JOB_COMPLETED);
  progress.Update(job, begin_, At(4));  // an ended job shows nothing new
  progress.Finish();
  progress.Finish();
  const std::string text = out_.text();
  const std::string last =
      "training [dear] epoch 2/2  iter 10/10  loss 0.2500  640 samples/s  comm 25%";
  // Rewritten in place (\r, no newline) until Finish, which ends on the training line with
  // the evaluating line's longer tail blanked, and one newline.
  EXPECT_NE(text.find("\revaluating: rank 0 on the test set, 1 of 2 workers done, 1 s"),
            std::string::npos)
      << text;
  const size_t end = text.rfind('\r');
  ASSERT_NE(end, std::string::npos);
  const std::string tail = text.substr(end + 1);
  EXPECT_EQ(tail.substr(0, last.size()), last) << tail;
  EXPECT_EQ(tail.back(), '\n');
  EXPECT_EQ(tail.find_first_not_of(' ', last.size()), tail.size() - 1) << "[" << tail << "]";
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
}

TEST_F(ProgressTest, TheLastLineHasTheLastIterationsEvenWhenOnlyTheEndedJobShowsThem) {
  ProgressLine progress(/*tty=*/false, out_.file());
  auto job = Running(2, 0, 50);
  Reached(job, 9, 1.0);
  progress.Update(job, begin_, At(1));
  Reached(job, 19, 0.8);
  progress.Update(job, begin_, At(2));
  // The rest of the training and the evaluation happened between two looks.
  Reached(job, 49, 0.4);
  job.set_state(herd::v1::JOB_COMPLETED);
  progress.Update(job, begin_, At(4));
  progress.Finish();
  const auto lines = out_.lines();
  ASSERT_EQ(lines.size(), 3u) << out_.text();
  EXPECT_NE(lines[1].find("iter 20/50"), std::string::npos) << lines[1];
  // 40 iterations x 128 samples in the 3 s since the first look.
  EXPECT_EQ(lines[2],
            "training [dear] epoch 2/2  iter 50/50  loss 0.4000  1707 samples/s  comm 25%");
}

TEST_F(ProgressTest, NothingToShowForAnEndedJobOrAfterFinish) {
  ProgressLine progress(/*tty=*/false, out_.file());
  auto job = Running(2, 0, 10);
  job.set_state(herd::v1::JOB_FAILED);
  progress.Update(job, begin_, At(1));
  progress.Finish();
  job.set_state(herd::v1::JOB_RUNNING);
  progress.Update(job, begin_, At(2));
  EXPECT_EQ(out_.text(), "");
}

TEST_F(ProgressTest, ATerminalThatShowedOnlyStartingEndsTheLine) {
  ProgressLine progress(/*tty=*/true, out_.file());
  progress.Update(Submitted(2, 0), begin_, At(1));
  progress.Finish();
  EXPECT_EQ(out_.text(), "\rstarting: 0 of 2 workers registered, 1 s\n");
}

}  // namespace
}  // namespace herd::cli
