#include "tests/unit/checkpoint/checkpoint_test_util.h"

#include <algorithm>
#include <filesystem>

#include "checkpoint/checkpoint_id.h"
#include "checkpoint/commit.h"
#include "checkpoint/state_source.h"
#include "checkpoint/writer.h"

namespace herd::checkpoint::testing {

float ValueAt(const std::string& name, int rank, int64_t iteration, int64_t i) {
  const float kind = name == "param/a" ? 1.0f : name == "param/b" ? 2.0f : 3.0f;
  return kind * 1000.0f + static_cast<float>(rank) * 100.0f + static_cast<float>(iteration) +
         static_cast<float>(i) / 16.0f;
}

ProcessState WorkerState(int rank, int64_t iteration) {
  ProcessState s;
  s.process = WorkerProcess(rank);
  auto add = [&](const std::string& name, int64_t total, int64_t offset, int64_t count) {
    std::vector<float> v(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) v[i] = ValueAt(name, rank, iteration, offset + i);
    AddExtent(s, name, total, offset, v);
  };
  add("param/a", 10, 0, 10);
  add("param/b", 7, 0, 3);
  add("param/b", 7, 3, 4);
  add("momentum/a", 10, 0, 10);
  s.values["iteration"] = std::to_string(iteration);
  s.values["epoch"] = "2";
  return s;
}

std::vector<herd::v1::TensorLayout> Layout() {
  std::vector<herd::v1::TensorLayout> layout(2);
  layout[0].set_name("a");
  layout[0].set_count(10);
  layout[0].add_shape(2);
  layout[0].add_shape(5);
  layout[0].set_dtype("fp32");
  layout[1].set_name("b");
  layout[1].set_count(7);
  layout[1].add_shape(7);
  layout[1].set_dtype("fp32");
  return layout;
}

absl::Status SaveCheckpoint(Env& env, const std::string& dir, int64_t iteration, int workers) {
  const std::string id = CheckpointId(iteration);
  herd::v1::CheckpointManifest manifest;
  manifest.set_job("test-job");
  manifest.set_id(id);
  manifest.set_iteration(iteration);
  manifest.set_mode("allreduce");
  manifest.set_workers(workers);
  manifest.set_created_unix_ms(1700000000000 + iteration);
  for (const auto& t : Layout()) *manifest.add_layout() = t;
  for (int r = 0; r < workers; ++r) {
    auto file = WriteStateFile(env, dir, id, WorkerState(r, iteration));
    if (!file.ok()) return file.status();
    *manifest.add_files() = *file;
  }
  return Commit(env, dir, manifest);
}

std::vector<std::string> FilesUnder(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace herd::checkpoint::testing
