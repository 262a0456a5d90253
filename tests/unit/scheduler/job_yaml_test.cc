// The YAML JobSpec format of `herd job submit` (scheduler/client/job_yaml.h).

#include "scheduler/client/job_yaml.h"

#include <gtest/gtest.h>

#include <fstream>

#include "scheduler/client/yaml_nesting.h"
#include "scheduler/job_spec.h"
#include "scheduler/limits.h"
#include "tests/unit/scheduler/test_jobs.h"

namespace herd::scheduler {
namespace {

constexpr char kExample[] = R"(# the example of docs/scheduler.md
name: j1
mode: decentralized
topology: random
workers: 6
servers: 2
seed: 7
optimizer: {name: momentum, learning_rate: 0.1}
tensors:
  - {name: fc1.weight, shape: [128, 784], dtype: fp32}
  - name: fc1.bias
    shape: [128]
    dtype: fp32
)";

TEST(JobYaml, ParsesTheExample) {
  auto spec = ParseJobSpecYaml(kExample);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "j1");
  EXPECT_EQ(spec->mode().mode(), "decentralized");
  EXPECT_EQ(spec->mode().topology(), "random");
  EXPECT_EQ(spec->workers(), 6);
  EXPECT_EQ(spec->servers(), 2);
  EXPECT_EQ(spec->seed(), 7u);
  EXPECT_EQ(spec->optimizer().name(), "momentum");
  EXPECT_DOUBLE_EQ(spec->optimizer().learning_rate(), 0.1);
  ASSERT_EQ(spec->tensors_size(), 2);
  EXPECT_EQ(spec->tensors(0).shape_size(), 2);
  EXPECT_EQ(spec->tensors(0).shape(1), 784);
  EXPECT_EQ(spec->tensors(1).name(), "fc1.bias");
  EXPECT_TRUE(NormalizeJobSpec(*spec).ok());
}

TEST(JobYaml, InfiniteStalenessIsMinusOne) {
  auto spec = ParseJobSpecYaml(
      "name: a\nmode: ps_async\nstaleness: inf\nworkers: 2\nservers: 1\n"
      "tensors:\n  - {name: w, shape: [4], dtype: fp32}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->mode().staleness(), -1);
}

TEST(JobYaml, ErrorsNameTheLine) {
  struct Case {
    const char* text;
    const char* needle;
  };
  const Case cases[] = {
      {"name: j1\nworkers: six\n", "line 2"},
      {"name: j1\nwrokers: 6\n", "unknown field 'wrokers'"},
      {"name: j1\ntensors:\n  - {name: a, shape: 5, dtype: fp32}\n", "list of dimensions"},
      {"name: j1\ntensors:\n  - {name: a, size: [5], dtype: fp32}\n", "unknown tensor field"},
      {"name: [j1\n", "not valid YAML"},
      {"- a\n- b\n", "map of fields"},
      {"name: j1\nname: j2\n", "appears twice"},
  };
  for (const auto& c : cases) {
    auto spec = ParseJobSpecYaml(c.text);
    ASSERT_FALSE(spec.ok()) << c.text;
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(spec.status().message()).find(c.needle), std::string::npos)
        << c.text << " -> " << spec.status();
  }
}

TEST(JobYaml, CheckpointPolicyAndResume) {
  const std::string base = "name: j1\nmode: allreduce\nworkers: 2\n";
  auto every_n = ParseJobSpecYaml(
      base +
      "checkpoint: {dir: /ck, every: 100, keep_last: 3, keep_every: 1000, timeout: 2m}\n"
      "resume_from: /ck/it-00000100\n");
  ASSERT_TRUE(every_n.ok()) << every_n.status();
  const auto& c = every_n->checkpoint();
  EXPECT_EQ(c.dir(), "/ck");
  EXPECT_EQ(c.every_iterations(), 100);
  EXPECT_EQ(c.every_ms(), 0);
  EXPECT_EQ(c.keep_last(), 3);
  EXPECT_EQ(c.keep_every(), 1000);
  EXPECT_EQ(c.timeout_ms(), 120000);
  EXPECT_EQ(every_n->resume_from(), "/ck/it-00000100");
  EXPECT_TRUE(NormalizeJobSpec(*every_n).ok());

  auto every_30s = ParseJobSpecYaml(base + "checkpoint: {dir: /ck, every: 30s}\n");
  ASSERT_TRUE(every_30s.ok()) << every_30s.status();
  EXPECT_EQ(every_30s->checkpoint().every_ms(), 30000);
  EXPECT_EQ(every_30s->checkpoint().every_iterations(), 0);

  auto bad = ParseJobSpecYaml(base + "checkpoint: {dir: /ck, every: soon}\n");
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status()));
  EXPECT_NE(bad.status().message().find("line 4"), std::string::npos) << bad.status();
  auto unknown = ParseJobSpecYaml(base + "checkpoint: {dir: /ck, each: 5}\n");
  EXPECT_NE(unknown.status().message().find("unknown checkpoint field 'each'"), std::string::npos)
      << unknown.status();
  // A policy without a directory has nowhere to write.
  auto no_dir = ParseJobSpecYaml(base + "checkpoint: {every: 5}\n");
  ASSERT_TRUE(no_dir.ok());
  auto refused = NormalizeJobSpec(*no_dir);
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status()));
  EXPECT_NE(refused.status().message().find("needs a 'dir'"), std::string::npos);
}

TEST(JobYaml, MissingFileIsAClearError) {
  auto spec = LoadJobSpecFile("/nonexistent/job.yaml");
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(spec.status().message()).find("/nonexistent/job.yaml"), std::string::npos);
}

// A huge file is refused before it is read whole or parsed (it once took 2.3 GB per 50 MB).
TEST(JobYaml, FileLargerThanTheLimitIsRefusedBeforeParsing) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/big.yaml";
  {
    std::ofstream out(path);
    out << kExample;
    const std::string line = "# " + std::string(1000, 'x') + "\n";
    for (size_t n = 0; n <= limits::kMaxSpecFileBytes / line.size(); ++n) out << line;
  }
  auto spec = LoadJobSpecFile(path);
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(spec.status().message()).find("at most 1048576 bytes"), std::string::npos)
      << spec.status();
  EXPECT_TRUE(ParseJobSpecYaml(kExample).ok()) << "the same spec without the padding parses";
}

TEST(JobYaml, DeepNestingIsRefusedBeforeParsing) {
  const std::string flow = "name: j1\nx: " + std::string(100000, '[') + std::string(100000, ']');
  auto spec = ParseJobSpecYaml(flow);
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(spec.status().message()).find("line 2: collections nest"),
            std::string::npos)
      << spec.status();
  std::string block = "name: j1\nx:\n";
  for (int i = 0; i < 40; ++i) block += std::string(static_cast<size_t>(2 * i + 2), ' ') + "- \n";
  EXPECT_EQ(ParseJobSpecYaml(block).status().code(), absl::StatusCode::kInvalidArgument);
  const std::string dashes = [] {
    std::string s = "x:\n";
    for (int i = 0; i < 30; ++i) s += "- ";
    return s + "1\n";
  }();
  EXPECT_FALSE(CheckYamlNesting(dashes, limits::kMaxSpecNesting).ok()) << "- - - ... nests";
  // Brackets in quotes and comments do not count. The example nests 3 deep; the scan counts the
  // indentation of "  - {" and the "- " both, so 5: conservative, far below the bound.
  EXPECT_TRUE(CheckYamlNesting("a: \"[[[[[[[[[[[[[[[[[[[[\" # {{{{{{{{{{{{{{{{{{{{{{{\n",
                               limits::kMaxSpecNesting)
                  .ok());
  EXPECT_TRUE(CheckYamlNesting(kExample, 5).ok());
}

// An alias repeats a node without repeating its text: a small file must not expand into a
// huge spec in the client.
TEST(JobYaml, AliasesCannotExpandPastTheBounds) {
  const std::string head = "name: j1\nmode: allreduce\nworkers: 1\ntensors: [&t {name: ";
  std::string text = head + std::string(100000, 'n') + ", shape: [1], dtype: fp32}";
  for (int i = 0; i < 100; ++i) text += ", *t";
  auto spec = ParseJobSpecYaml(text + "]\n");
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(spec.status().message()).find("more than 256"), std::string::npos)
      << spec.status();
  text = head + "n, shape: [1], dtype: fp32}";
  for (int i = 0; i < limits::kMaxTensors + 1; ++i) text += ",*t";
  spec = ParseJobSpecYaml(text + "]\n");
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(spec.status().message()).find("tensors, more than 16384"),
            std::string::npos)
      << spec.status();
}

}  // namespace
}  // namespace herd::scheduler
