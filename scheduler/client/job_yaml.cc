#include "scheduler/client/job_yaml.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "scheduler/client/yaml_nesting.h"
#include "scheduler/limits.h"

namespace herd::scheduler {
namespace {

absl::Status At(const YAML::Node& node, std::string_view what) {
  const auto mark = node.Mark();
  return absl::InvalidArgumentError(absl::StrFormat("job spec, line %d: %s", mark.line + 1, what));
}

// Reads a scalar as T, with the line of the value in the error.
template <typename T>
absl::StatusOr<T> Scalar(const YAML::Node& node, std::string_view key) {
  if (!node.IsScalar()) return At(node, absl::StrFormat("'%s' must be a single value", key));
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    return At(node,
              absl::StrFormat("'%s' has the value '%s' of the wrong type", key, node.Scalar()));
  }
}

#define HERD_YAML_ASSIGN(lhs, expr)   \
  do {                                \
    auto v_ = (expr);                 \
    if (!v_.ok()) return v_.status(); \
    lhs = *v_;                        \
  } while (0)

absl::Status ReadTensor(const YAML::Node& t, herd::v1::TensorSpec* out) {
  if (!t.IsMap()) return At(t, "each tensor is a map {name, shape, dtype}");
  for (const auto& kv : t) {
    const std::string key = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    if (key == "name") {
      std::string s;
      HERD_YAML_ASSIGN(s, Scalar<std::string>(v, key));
      // Checked here too, not only by the scheduler: an alias repeats a node without repeating
      // its text, so a small file could otherwise expand into a huge spec in the client.
      if (s.size() > limits::kMaxTensorNameBytes) {
        return At(v, absl::StrFormat("a tensor name has %d bytes, more than %d", s.size(),
                                     limits::kMaxTensorNameBytes));
      }
      out->set_name(s);
    } else if (key == "dtype") {
      std::string s;
      HERD_YAML_ASSIGN(s, Scalar<std::string>(v, key));
      out->set_dtype(s);
    } else if (key == "shape") {
      if (!v.IsSequence()) return At(v, "'shape' is a list of dimensions, e.g. [128, 784]");
      if (v.size() > static_cast<size_t>(limits::kMaxTensorRank)) {
        return At(v, absl::StrFormat("a shape has %d dimensions, more than %d", v.size(),
                                     limits::kMaxTensorRank));
      }
      for (const auto& d : v) {
        int64_t dim = 0;
        HERD_YAML_ASSIGN(dim, Scalar<int64_t>(d, "shape"));
        out->add_shape(dim);
      }
    } else {
      return At(kv.first, absl::StrFormat("unknown tensor field '%s' (name, shape, dtype)", key));
    }
  }
  return absl::OkStatus();
}

absl::Status ReadOptimizer(const YAML::Node& o, herd::v1::OptimizerSpec* out) {
  if (o.IsScalar()) {  // `optimizer: adam`
    out->set_name(o.Scalar());
    return absl::OkStatus();
  }
  if (!o.IsMap()) return At(o, "'optimizer' is a name or a map {name, learning_rate, ...}");
  for (const auto& kv : o) {
    const std::string key = kv.first.as<std::string>();
    double x = 0;
    if (key == "name") {
      std::string s;
      HERD_YAML_ASSIGN(s, Scalar<std::string>(kv.second, key));
      out->set_name(s);
    } else if (key == "learning_rate" || key == "lr") {
      HERD_YAML_ASSIGN(x, Scalar<double>(kv.second, key));
      out->set_learning_rate(x);
    } else if (key == "momentum") {
      HERD_YAML_ASSIGN(x, Scalar<double>(kv.second, key));
      out->set_momentum(x);
    } else if (key == "weight_decay") {
      HERD_YAML_ASSIGN(x, Scalar<double>(kv.second, key));
      out->set_weight_decay(x);
    } else {
      return At(kv.first,
                absl::StrFormat("unknown optimizer field '%s' (name, learning_rate, momentum, "
                                "weight_decay)",
                                key));
    }
  }
  return absl::OkStatus();
}

absl::Status ReadTraining(const YAML::Node& o, herd::v1::TrainingSpec* out) {
  if (!o.IsMap()) return At(o, "'training' is a map {model, epochs, batch_size, train_samples}");
  for (const auto& kv : o) {
    const std::string key = kv.first.as<std::string>();
    int64_t i = 0;
    if (key == "model") {
      std::string s;
      HERD_YAML_ASSIGN(s, Scalar<std::string>(kv.second, key));
      out->set_model(s);
    } else if (key == "epochs") {
      HERD_YAML_ASSIGN(i, Scalar<int32_t>(kv.second, key));
      out->set_epochs(static_cast<int32_t>(i));
    } else if (key == "batch_size") {
      HERD_YAML_ASSIGN(i, Scalar<int32_t>(kv.second, key));
      out->set_batch_size(static_cast<int32_t>(i));
    } else if (key == "train_samples") {
      HERD_YAML_ASSIGN(i, Scalar<int64_t>(kv.second, key));
      out->set_train_samples(i);
    } else {
      return At(kv.first,
                absl::StrFormat(
                    "unknown training field '%s' (model, epochs, batch_size, train_samples)", key));
    }
  }
  return absl::OkStatus();
}

// `checkpoint: {dir: DIR, every: 100 | 30s, keep_last: N, keep_every: N, timeout: 10m}`: a
// bare number of `every` is iterations, a number with a unit a duration.
absl::Status ReadCheckpoint(const YAML::Node& o, herd::v1::CheckpointPolicy* out) {
  if (!o.IsMap()) return At(o, "'checkpoint' is a map {dir, every, keep_last, keep_every}");
  auto duration_ms = [](const YAML::Node& v, std::string_view key) -> absl::StatusOr<int64_t> {
    if (!v.IsScalar()) return At(v, absl::StrFormat("'%s' must be a single value", key));
    absl::Duration d;
    if (!absl::ParseDuration(v.Scalar(), &d) || d <= absl::ZeroDuration()) {
      return At(
          v, absl::StrFormat("'%s' is '%s'; give a duration like 30s, 10m or 1h", key, v.Scalar()));
    }
    return absl::ToInt64Milliseconds(d);
  };
  for (const auto& kv : o) {
    const std::string key = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    int64_t i = 0;
    if (key == "dir") {
      std::string s;
      HERD_YAML_ASSIGN(s, Scalar<std::string>(v, key));
      out->set_dir(s);
    } else if (key == "every") {
      int64_t n = 0;
      if (v.IsScalar() && absl::SimpleAtoi(v.Scalar(), &n)) {
        if (n < 1) return At(v, "'every' is a count of iterations >= 1, or a duration (30s)");
        out->set_every_iterations(n);
      } else {
        HERD_YAML_ASSIGN(i, duration_ms(v, key));
        out->set_every_ms(i);
      }
    } else if (key == "keep_last") {
      HERD_YAML_ASSIGN(i, Scalar<int32_t>(v, key));
      out->set_keep_last(static_cast<int32_t>(i));
    } else if (key == "keep_every") {
      HERD_YAML_ASSIGN(i, Scalar<int32_t>(v, key));
      out->set_keep_every(static_cast<int32_t>(i));
    } else if (key == "timeout") {
      HERD_YAML_ASSIGN(i, duration_ms(v, key));
      out->set_timeout_ms(i);
    } else {
      return At(
          kv.first,
          absl::StrFormat(
              "unknown checkpoint field '%s' (dir, every, keep_last, keep_every, timeout)", key));
    }
  }
  return absl::OkStatus();
}

// `elastic: {min_workers: N, max_workers: N, max_failures: N, pending_timeout: 10m}`.
absl::Status ReadElastic(const YAML::Node& o, herd::v1::ElasticSpec* out) {
  if (!o.IsMap()) {
    return At(o, "'elastic' is a map {min_workers, max_workers, max_failures, pending_timeout}");
  }
  for (const auto& kv : o) {
    const std::string key = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    int64_t i = 0;
    if (key == "min_workers") {
      HERD_YAML_ASSIGN(i, Scalar<int32_t>(v, key));
      out->set_min_workers(static_cast<int32_t>(i));
    } else if (key == "max_workers") {
      HERD_YAML_ASSIGN(i, Scalar<int32_t>(v, key));
      out->set_max_workers(static_cast<int32_t>(i));
    } else if (key == "max_failures") {
      HERD_YAML_ASSIGN(i, Scalar<int32_t>(v, key));
      out->set_max_failures(static_cast<int32_t>(i));
    } else if (key == "pending_timeout") {
      absl::Duration d;
      if (!v.IsScalar() || !absl::ParseDuration(v.Scalar(), &d) || d <= absl::ZeroDuration() ||
          d == absl::InfiniteDuration()) {
        return At(v, "'pending_timeout' is a finite duration like 30s, 10m or 1h");
      }
      out->set_pending_timeout_ms(std::max<int64_t>(1, absl::ToInt64Milliseconds(d)));
    } else {
      return At(kv.first, absl::StrFormat("unknown elastic field '%s' (min_workers, max_workers, "
                                          "max_failures, pending_timeout)",
                                          key));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<herd::v1::JobSpec> FromNode(const YAML::Node& root) {
  if (!root.IsMap()) return At(root, "a job spec is a map of fields (name, mode, workers, ...)");
  herd::v1::JobSpec spec;
  auto* mode = spec.mutable_mode();
  std::set<std::string> seen;
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    if (!seen.insert(key).second) return At(kv.first, absl::StrFormat("'%s' appears twice", key));
    std::string s;
    int64_t i = 0;
    double d = 0;
    if (key == "name") {
      HERD_YAML_ASSIGN(s, Scalar<std::string>(v, key));
      spec.set_name(s);
    } else if (key == "mode") {
      HERD_YAML_ASSIGN(s, Scalar<std::string>(v, key));
      mode->set_mode(s);
    } else if (key == "topology") {
      HERD_YAML_ASSIGN(s, Scalar<std::string>(v, key));
      mode->set_topology(s);
    } else if (key == "compressor") {
      HERD_YAML_ASSIGN(s, Scalar<std::string>(v, key));
      mode->set_compressor(s);
    } else if (key == "teams") {
      HERD_YAML_ASSIGN(i, Scalar<int32_t>(v, key));
      mode->set_teams(static_cast<int32_t>(i));
    } else if (key == "staleness") {
      // `inf` (no bound) is -1 in the JobSpec.
      if (v.IsScalar() && (v.Scalar() == "inf" || v.Scalar() == "infinity")) {
        mode->set_staleness(-1);
      } else {
        HERD_YAML_ASSIGN(i, Scalar<int32_t>(v, key));
        mode->set_staleness(static_cast<int32_t>(i));
      }
    } else if (key == "density") {
      HERD_YAML_ASSIGN(d, Scalar<double>(v, key));
      mode->set_density(d);
    } else if (key == "block_bytes") {
      HERD_YAML_ASSIGN(i, Scalar<int64_t>(v, key));
      mode->set_block_bytes(i);
    } else if (key == "workers") {
      HERD_YAML_ASSIGN(i, Scalar<int32_t>(v, key));
      spec.set_workers(static_cast<int32_t>(i));
    } else if (key == "servers") {
      HERD_YAML_ASSIGN(i, Scalar<int32_t>(v, key));
      spec.set_servers(static_cast<int32_t>(i));
    } else if (key == "seed") {
      uint64_t seed = 0;
      HERD_YAML_ASSIGN(seed, Scalar<uint64_t>(v, key));
      spec.set_seed(seed);
    } else if (key == "chunk_bytes") {
      HERD_YAML_ASSIGN(i, Scalar<int64_t>(v, key));
      spec.set_chunk_bytes(i);
    } else if (key == "optimizer") {
      if (auto st = ReadOptimizer(v, spec.mutable_optimizer()); !st.ok()) return st;
    } else if (key == "training") {
      if (auto st = ReadTraining(v, spec.mutable_training()); !st.ok()) return st;
    } else if (key == "checkpoint") {
      if (auto st = ReadCheckpoint(v, spec.mutable_checkpoint()); !st.ok()) return st;
    } else if (key == "elastic") {
      if (auto st = ReadElastic(v, spec.mutable_elastic()); !st.ok()) return st;
    } else if (key == "resume_from") {
      HERD_YAML_ASSIGN(s, Scalar<std::string>(v, key));
      spec.set_resume_from(s);
    } else if (key == "tensors") {
      if (!v.IsSequence()) return At(v, "'tensors' is a list of {name, shape, dtype}");
      if (v.size() > static_cast<size_t>(limits::kMaxTensors)) {
        return At(v, absl::StrFormat("%d tensors, more than %d", v.size(), limits::kMaxTensors));
      }
      for (const auto& t : v) {
        if (auto st = ReadTensor(t, spec.add_tensors()); !st.ok()) return st;
      }
    } else {
      return At(kv.first,
                absl::StrFormat("unknown field '%s' (see docs/scheduler.md for the JobSpec format)",
                                key));
    }
  }
  return spec;
}

}  // namespace

absl::StatusOr<herd::v1::JobSpec> ParseJobSpecYaml(std::string_view text) {
  if (text.size() > limits::kMaxSpecFileBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "job spec has %d bytes, more than %d; leave the tensors out (the workers declare them)",
        text.size(), limits::kMaxSpecFileBytes));
  }
  if (auto st = CheckYamlNesting(text, limits::kMaxSpecNesting); !st.ok()) return st;
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrFormat("job spec is not valid YAML: %s", e.what()));
  }
  try {
    return FromNode(root);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrFormat("job spec: %s", e.what()));
  }
}

absl::StatusOr<herd::v1::JobSpec> LoadJobSpecFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrFormat("cannot read job spec file %s", path));
  // At most one byte past the bound is read: a huge file is refused without reading it whole
  // (and a pipe or device has no size to ask for).
  std::string text(limits::kMaxSpecFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > limits::kMaxSpecFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: a job spec file has at most %d bytes; this one has more", path,
                        limits::kMaxSpecFileBytes));
  }
  auto spec = ParseJobSpecYaml(text);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %s", path, std::string(spec.status().message())));
  }
  return spec;
}

}  // namespace herd::scheduler
