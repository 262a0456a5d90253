#include "checkpoint/reader.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "checkpoint/catalog.h"
#include "checkpoint/checkpoint_id.h"
#include "checkpoint/state_file.h"
#include "common/dtype.h"

namespace herd::checkpoint {

CheckpointReader::CheckpointReader(Env& env, std::string path,
                                   herd::v1::CheckpointManifest manifest)
    : env_(env), path_(std::move(path)), manifest_(std::move(manifest)) {
  for (int i = 0; i < manifest_.files_size(); ++i) {
    const auto& f = manifest_.files(i);
    file_of_.emplace(f.process(), i);
    for (int j = 0; j < f.extents_size(); ++j) {
      extents_of_[{f.process(), f.extents(j).name()}].push_back(j);
      elements_of_[f.extents(j).name()] += f.extents(j).count();
    }
  }
}

int64_t CheckpointReader::ElementsHeld(std::string_view process, std::string_view name) const {
  if (process.empty()) {
    auto it = elements_of_.find(name);
    return it == elements_of_.end() ? 0 : it->second;
  }
  const herd::v1::CheckpointFile* file = FileOf(process);
  auto it = extents_of_.find(std::make_pair(std::string(process), std::string(name)));
  if (file == nullptr || it == extents_of_.end()) return 0;
  int64_t n = 0;
  for (int j : it->second) n += file->extents(j).count();
  return n;
}

absl::StatusOr<std::vector<Extent>> CheckpointReader::ReadExtents(std::string_view process,
                                                                  std::string_view name) const {
  std::vector<Extent> out;
  const herd::v1::CheckpointFile* file = FileOf(process);
  auto it = extents_of_.find(std::make_pair(std::string(process), std::string(name)));
  if (file == nullptr || it == extents_of_.end()) return out;
  for (int j : it->second) {
    const auto& e = file->extents(j);
    auto dtype = ParseDType(e.dtype());
    if (!dtype.ok()) {
      return absl::DataLossError(absl::StrFormat("%s/%s: extent %s has dtype '%s'", path_,
                                                 file->file(), DescribeExtent(e), e.dtype()));
    }
    auto bytes = ReadExtent(*file, e);
    if (!bytes.ok()) return bytes.status();
    out.push_back(Extent{.name = e.name(),
                         .dtype = *dtype,
                         .total = e.total(),
                         .offset = e.offset(),
                         .bytes = *std::move(bytes)});
  }
  return out;
}
CheckpointReader::~CheckpointReader() = default;

const herd::v1::CheckpointFile* CheckpointReader::FileOf(std::string_view process) const {
  auto it = file_of_.find(process);
  return it == file_of_.end() ? nullptr : &manifest_.files(it->second);
}

absl::StatusOr<std::string> CheckpointReader::ReadExtent(
    const herd::v1::CheckpointFile& file, const herd::v1::CheckpointExtent& extent) const {
  const std::string path = JoinPath(path_, file.file());
  auto reader = env_.NewRandomAccessFile(path);
  if (!reader.ok()) {
    if (absl::IsNotFound(reader.status())) {
      return absl::DataLossError(
          absl::StrFormat("%s is missing (%s's state)", path, file.process()));
    }
    return reader.status();
  }
  return checkpoint::ReadExtent(**reader, path, extent);
}

bool CheckpointReader::Has(std::string_view process, std::string_view name) const {
  return extents_of_.count(std::make_pair(std::string(process), std::string(name))) > 0;
}

absl::Status CheckpointReader::Read(std::string_view process, std::string_view name, int64_t total,
                                    int64_t offset, std::span<float> out) const {
  const herd::v1::CheckpointFile* file = FileOf(process);
  if (file == nullptr || !Has(process, name)) {
    return absl::NotFoundError(
        absl::StrFormat("%s holds no state '%s' in checkpoint %s", process, name, path_));
  }
  const int64_t end = offset + static_cast<int64_t>(out.size());
  int64_t covered = 0;
  for (int j : extents_of_.at(std::make_pair(std::string(process), std::string(name)))) {
    const auto& e = file->extents(j);
    if (e.dtype() != DTypeName(DType::kFloat32) || e.total() != total) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "state '%s' of %s in checkpoint %s is %s of %d elements, expected fp32 of %d", name,
          process, path_, e.dtype(), e.total(), total));
    }
    const int64_t lo = std::max(offset, e.offset()), hi = std::min(end, e.offset() + e.count());
    if (lo >= hi) continue;
    auto bytes = ReadExtent(*file, e);
    if (!bytes.ok()) return bytes.status();
    std::memcpy(out.data() + (lo - offset), bytes->data() + (lo - e.offset()) * sizeof(float),
                static_cast<size_t>(hi - lo) * sizeof(float));
    covered += hi - lo;
  }
  if (covered < end - offset) {
    return absl::OutOfRangeError(
        absl::StrFormat("state '%s' of %s in checkpoint %s covers %d of the elements [%d, %d)",
                        name, process, path_, covered, offset, end));
  }
  return absl::OkStatus();
}

std::optional<std::string> CheckpointReader::Value(std::string_view process,
                                                   std::string_view key) const {
  const herd::v1::CheckpointFile* file = FileOf(process);
  if (file == nullptr) return std::nullopt;
  auto it = file->values().find(std::string(key));
  if (it == file->values().end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> CheckpointReader::processes() const {
  std::vector<std::string> out;
  for (const auto& f : manifest_.files()) out.push_back(f.process());
  return out;
}

absl::StatusOr<ProcessState> CheckpointReader::ReadProcess(std::string_view process) const {
  const herd::v1::CheckpointFile* file = FileOf(process);
  if (file == nullptr) {
    return absl::NotFoundError(absl::StrFormat("checkpoint %s has no state of %s", path_, process));
  }
  ProcessState state;
  state.process = file->process();
  for (const auto& [k, v] : file->values()) state.values[k] = v;
  for (const auto& e : file->extents()) {
    auto dtype = ParseDType(e.dtype());
    if (!dtype.ok()) {
      return absl::DataLossError(absl::StrFormat("%s/%s: extent %s has dtype '%s'", path_,
                                                 file->file(), DescribeExtent(e), e.dtype()));
    }
    auto bytes = ReadExtent(*file, e);
    if (!bytes.ok()) return bytes.status();
    state.extents.push_back(Extent{.name = e.name(),
                                   .dtype = *dtype,
                                   .total = e.total(),
                                   .offset = e.offset(),
                                   .bytes = *std::move(bytes)});
  }
  return state;
}

namespace {

std::string Describe(const herd::v1::TensorLayout& t) {
  std::string s = absl::StrFormat("'%s' of %d elements", t.name(), t.count());
  if (t.shape_size() > 0) s += absl::StrFormat(" [%s]", absl::StrJoin(t.shape(), ", "));
  if (!t.dtype().empty()) s += " " + t.dtype();
  return s;
}

bool SameShape(const herd::v1::TensorLayout& a, const herd::v1::TensorLayout& b) {
  if (a.shape_size() == 0 || b.shape_size() == 0) return true;  // one side does not say
  return std::equal(a.shape().begin(), a.shape().end(), b.shape().begin(), b.shape().end());
}

}  // namespace

absl::Status CheckpointReader::CheckLayout(
    const std::vector<herd::v1::TensorLayout>& layout) const {
  const auto& saved = manifest_.layout();
  const size_t n = std::min(layout.size(), static_cast<size_t>(saved.size()));
  for (size_t i = 0; i < n; ++i) {
    const auto& a = saved[static_cast<int>(i)];
    const auto& b = layout[i];
    const bool dtype_ok = a.dtype().empty() || b.dtype().empty() || a.dtype() == b.dtype();
    if (a.name() != b.name() || a.count() != b.count() || !SameShape(a, b) || !dtype_ok) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "checkpoint %s is of another model: tensor %d is %s in the checkpoint, %s in this "
          "model",
          path_, i, Describe(a), Describe(b)));
    }
  }
  if (layout.size() != static_cast<size_t>(saved.size())) {
    const bool model_longer = layout.size() > static_cast<size_t>(saved.size());
    const std::string first =
        model_longer ? Describe(layout[n]) : Describe(saved[static_cast<int>(n)]);
    return absl::FailedPreconditionError(absl::StrFormat(
        "checkpoint %s is of another model: it has %d tensors, this model %d; the first "
        "tensor only %s has is %s",
        path_, saved.size(), layout.size(), model_longer ? "the model" : "the checkpoint", first));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CheckpointReader>> OpenCheckpoint(Env& env,
                                                                 const std::string& path) {
  const bool one = env.Exists(JoinPath(path, kManifestFile));
  if (!one) {
    // A directory of checkpoints (or an error ResolveCheckpoint words).
    auto resolved = ResolveCheckpoint(env, path);
    if (!resolved.ok()) return resolved.status();
    std::unique_ptr<CheckpointReader> reader(
        new CheckpointReader(env, resolved->path, std::move(resolved->manifest)));
    reader->skipped_ = std::move(resolved->skipped);
    return reader;
  }
  auto manifest = ReadManifest(env, path);
  if (!manifest.ok()) return manifest.status();
  // What VerifyCheckpoint checks of the manifest alone, cheap enough for every process that
  // resumes: a manifest put in place after the scheduler verified the checkpoint is held to
  // the same rules (its id, every tensor's parameters whole where a resume reads them).
  if (absl::Status s = CheckManifestOfCheckpoint(*manifest, path); !s.ok()) return s;
  for (const auto& file : manifest->files()) {
    const std::string name = JoinPath(path, file.file());
    auto info = env.Stat(name);
    if (!info.ok()) {
      return absl::DataLossError(
          absl::StrFormat("%s is missing (%s's state)", name, file.process()));
    }
    if (!info->is_regular) return RegularFileProblem(env, name);
    if (info->size != static_cast<uint64_t>(file.bytes())) {
      return absl::DataLossError(
          absl::StrFormat("%s: size expected %d bytes, actual %d", name, file.bytes(), info->size));
    }
  }
  return std::unique_ptr<CheckpointReader>(new CheckpointReader(env, path, *std::move(manifest)));
}

}  // namespace herd::checkpoint
