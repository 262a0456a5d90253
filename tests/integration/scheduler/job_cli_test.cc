// `herd job ...` against a real `herd scheduler`: the commands an operator types.

#include <gtest/gtest.h>

#include <fstream>

#include "absl/strings/str_join.h"
#include "scheduler/client/scheduler_client.h"
#include "tests/integration/scheduler/scheduler_process.h"
#include "tests/unit/scheduler/test_jobs.h"

namespace herd::scheduler {
namespace {

using testing::ExampleSpec;
using testing::RunHerd;
using testing::SchedulerProcess;
using testing::TempDir;

constexpr char kSpec[] = R"(name: j1
mode: decentralized
topology: random
workers: 6
servers: 2
seed: 7
tensors:
  - {name: fc1.weight, shape: [128, 784], dtype: fp32}
  - {name: fc1.bias, shape: [128], dtype: fp32}
  - {name: fc2.weight, shape: [10, 128], dtype: fp32}
)";

// The "peers" array of `herd job plan --json` output, as text.
std::string PeersJson(const std::string& out) {
  const size_t at = out.find("\"peers\":[");
  if (at == std::string::npos) return "";
  size_t depth = 0, i = at + 8;
  for (; i < out.size(); ++i) {
    if (out[i] == '[') ++depth;
    if (out[i] == ']' && --depth == 0) break;
  }
  return out.substr(at + 8, i - (at + 8) + 1);
}

TEST(JobCli, SubmitPlanSetModeStatusListCancel) {
  TempDir dir;
  SchedulerProcess proc;
  proc.Start(dir.path() + "/state", 0);
  const std::string addr = proc.address();
  const std::string file = dir.path() + "/j1.yaml";
  std::ofstream(file) << kSpec;

  auto r = RunHerd({"job", "submit", file, "--scheduler", addr});
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("submitted job j1"), std::string::npos) << r.out;

  // The plan answers before any process registered; its peers are the pairing of the
  // documented PRNG, the same through the API, and differ between iterations.
  ClientOptions o;
  o.address = addr;
  auto c = SchedulerClient::Connect(o);
  ASSERT_TRUE(c.ok());
  std::set<std::string> distinct;
  for (int it : {0, 1, 2, 5}) {
    r = RunHerd(
        {"job", "plan", "j1", "--iteration", std::to_string(it), "--json", "--scheduler", addr});
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("\"epoch\":1,"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\"iteration\":" + std::to_string(it) + ","), std::string::npos);
    EXPECT_NE(r.out.find("\"mode\":\"decentralized\""), std::string::npos);
    herd::v1::GetPlanRequest req;
    req.set_job("j1");
    req.set_iteration(it);
    auto plan = (*c)->GetPlan(req);
    ASSERT_TRUE(plan.ok());
    std::vector<std::string> lists;
    for (const auto& p : plan->peers()) lists.push_back("[" + absl::StrJoin(p.ranks(), ",") + "]");
    EXPECT_EQ(PeersJson(r.out), "[" + absl::StrJoin(lists, ",") + "]") << r.out;
    distinct.insert(PeersJson(r.out));
  }
  EXPECT_GE(distinct.size(), 2u) << "the random pairing changes across iterations";

  r = RunHerd({"job", "plan", "j1", "--iteration", "3", "--scheduler", addr});
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("rank 5:"), std::string::npos) << r.out;

  r = RunHerd({"job", "set-mode", "j1", "sparse", "--teams", "3", "--from-iteration", "10",
               "--scheduler", addr});
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("from iteration 10"), std::string::npos) << r.out;
  r = RunHerd({"job", "plan", "j1", "--iteration", "10", "--json", "--scheduler", addr});
  EXPECT_NE(r.out.find("\"mode\":\"sparse\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"teams\":[[0,1],[2,3],[4,5]]"), std::string::npos) << r.out;

  r = RunHerd({"job", "list", "--scheduler", addr});
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("j1"), std::string::npos);
  EXPECT_NE(r.out.find("PENDING"), std::string::npos) << r.out;

  r = RunHerd({"job", "status", "j1", "--scheduler", addr});
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("sparse (teams 3"), std::string::npos) << r.out;

  // Errors: a clear message and a failing exit code.
  r = RunHerd({"job", "submit", file, "--scheduler", addr});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("ALREADY_EXISTS"), std::string::npos) << r.out;
  r = RunHerd({"job", "set-mode", "j1", "ps_ec", "--topology", "ring", "--scheduler", addr});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("INVALID_ARGUMENT"), std::string::npos) << r.out;
  r = RunHerd({"job", "status", "nope", "--scheduler", addr});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("NOT_FOUND"), std::string::npos) << r.out;
  std::ofstream(dir.path() + "/bad.yaml") << "name: j2\nworkers: 0\nmode: allreduce\n";
  r = RunHerd({"job", "submit", dir.path() + "/bad.yaml", "--scheduler", addr});
  EXPECT_EQ(r.rc, 2) << "a spec that cannot pass is a configuration error: " << r.out;
  EXPECT_NE(r.out.find("workers"), std::string::npos) << r.out;
  r = RunHerd({"job", "plan", "j1", "--scheduler", addr});
  EXPECT_EQ(r.rc, 2) << "missing --iteration is a usage error: " << r.out;

  r = RunHerd({"job", "cancel", "j1", "--scheduler", addr});
  ASSERT_EQ(r.rc, 0) << r.out;
  r = RunHerd({"job", "status", "j1", "--scheduler", addr});
  EXPECT_NE(r.out.find("CANCELLED"), std::string::npos) << r.out;
}

// What the scheduler stores came from processes and operators: `herd job status` prints it with
// control bytes escaped. A C1 control (CSI, U+009B, as UTF-8) in a worker's failure reason is
// kept by the scheduler (it makes only C0 bytes spaces) and would reach the terminal raw.
TEST(JobCli, StatusEscapesControlBytesInWhatProcessesReported) {
  TempDir dir;
  SchedulerProcess proc;
  proc.Start(dir.path() + "/state", 0);
  ClientOptions o;
  o.address = proc.address();
  auto c = SchedulerClient::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*c)->SubmitJob(ExampleSpec("j1", 2, 0)).ok());
  herd::v1::RegisterNodeRequest reg;
  reg.set_job("j1");
  reg.set_role(herd::v1::ROLE_WORKER);
  reg.set_name("w0");
  reg.set_address("w0:9000");
  auto w0 = (*c)->RegisterNode(reg);
  ASSERT_TRUE(w0.ok()) << w0.status();
  herd::v1::FailJobRequest fail;
  fail.set_job("j1");
  fail.set_node_id(w0->node_id());
  fail.set_reason(
      "disk \xc2\x9b"
      "2J gone");
  ASSERT_TRUE((*c)->FailJob(fail).ok());

  auto r = RunHerd({"job", "status", "j1", "--scheduler", proc.address()});
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("disk \\xc2\\x9b2J gone"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\xc2\x9b"), std::string::npos) << r.out;
}

TEST(JobCli, UnreachableSchedulerIsAClearError) {
  auto r = RunHerd({"job", "list", "--scheduler", "127.0.0.1:1"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("UNAVAILABLE"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("127.0.0.1:1"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace herd::scheduler
