#pragma once
// JobSpecs and temporary state directories shared by the scheduler tests.

#include <unistd.h>

#include <filesystem>
#include <string>

#include "herd/v1/job.pb.h"

namespace herd::scheduler::testing {

// A valid decentralized job with a random topology (the example of docs/scheduler.md).
inline herd::v1::JobSpec ExampleSpec(const std::string& name = "j1", int workers = 6,
                                     int servers = 2) {
  herd::v1::JobSpec spec;
  spec.set_name(name);
  spec.mutable_mode()->set_mode("decentralized");
  spec.mutable_mode()->set_topology("random");
  spec.set_workers(workers);
  spec.set_servers(servers);
  spec.set_seed(7);
  auto* t = spec.add_tensors();
  t->set_name("fc1.weight");
  t->add_shape(128);
  t->add_shape(784);
  t->set_dtype("fp32");
  t = spec.add_tensors();
  t->set_name("fc1.bias");
  t->add_shape(128);
  t->set_dtype("float32");
  return spec;
}

// A ps_async job: the mode that goes on with the live workers, so a dead one can come back.
inline herd::v1::JobSpec AsyncSpec(const std::string& name, int workers, int servers) {
  auto spec = ExampleSpec(name, workers, servers);
  spec.mutable_mode()->clear_topology();
  spec.mutable_mode()->set_mode("ps_async");
  return spec;
}

// A fresh directory under the test's temporary folder, removed with the object.
class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("herd-sched-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string path() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

}  // namespace herd::scheduler::testing
