#include "checkpoint/export.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "absl/strings/str_format.h"
#include "checkpoint/manifest_check.h"
#include "checkpoint/state_source.h"

namespace herd::checkpoint {
namespace {

constexpr std::string_view kParamPrefix = "param/";

absl::Status NotWhole(const CheckpointReader& reader, const std::string& name, int64_t held,
                      int64_t total) {
  return absl::DataLossError(
      absl::StrFormat("checkpoint %s: %s is a tensor of %d elements, but its files hold %d of them",
                      reader.path(), name, total, held));
}

// A tensor of `total` elements assembled from the extents of every process that holds part
// of `name` (a parameter server's shards each hold a range).
absl::StatusOr<std::vector<float>> Assemble(const CheckpointReader& reader, const std::string& name,
                                            int64_t total) {
  // Allocated only for what the files can fill.
  if (const int64_t held = reader.ElementsHeld("", name); held < total) {
    return NotWhole(reader, name, held, total);
  }
  std::vector<float> out(static_cast<size_t>(total));
  std::vector<bool> have(static_cast<size_t>(total), false);
  for (const std::string& process : reader.processes()) {
    if (!reader.Has(process, name)) continue;
    auto extents = reader.ReadExtents(process, name);  // this tensor's only
    if (!extents.ok()) return extents.status();
    for (const Extent& e : *extents) {
      if (e.dtype != DType::kFloat32 || e.total != total) {
        return absl::FailedPreconditionError(
            absl::StrFormat("%s of %s is %s of %d elements, expected fp32 of %d", name, process,
                            DTypeName(e.dtype), e.total, total));
      }
      std::memcpy(out.data() + e.offset, e.bytes.data(), e.bytes.size());
      std::fill(have.begin() + e.offset, have.begin() + e.offset + e.count(), true);
    }
  }
  const auto missing = std::count(have.begin(), have.end(), false);
  if (missing > 0) {
    return absl::OutOfRangeError(absl::StrFormat(
        "%s: %d of its %d elements are in no process of the checkpoint", name, missing, total));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<ModelTensor>> ModelParameters(const CheckpointReader& reader) {
  // The parameters' names and totals, in the layout's order, then in the files' order.
  // One pass over the manifest: a checkpoint of thousands of workers and tensors is looked at
  // once per extent, never once per worker and tensor.
  std::vector<std::string> order;
  std::set<std::string> ordered;
  std::map<std::string, int64_t> totals;
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& t : reader.manifest().layout()) {
    if (ordered.insert(t.name()).second) order.push_back(t.name());
    shapes[t.name()] = {t.shape().begin(), t.shape().end()};
  }
  std::map<std::string, int> worker_rank;
  for (int r = 0; r < reader.workers(); ++r) worker_rank.emplace(WorkerProcess(r), r);
  // The lowest worker rank that holds each param/<tensor> (its replicated copy, if any).
  std::map<std::string, int> first_worker_of;
  for (const auto& file : reader.manifest().files()) {
    const auto rank = worker_rank.find(file.process());
    for (const auto& e : file.extents()) {
      if (!e.name().starts_with(kParamPrefix)) continue;
      const std::string tensor = e.name().substr(kParamPrefix.size());
      if (totals.emplace(tensor, e.total()).second && ordered.insert(tensor).second) {
        order.push_back(tensor);
      }
      if (rank != worker_rank.end()) {
        auto [at, added] = first_worker_of.emplace(e.name(), rank->second);
        if (!added) at->second = std::min(at->second, rank->second);
      }
    }
  }
  if (totals.empty()) {
    return absl::NotFoundError(
        absl::StrFormat("checkpoint %s holds no parameters (no param/* state)", reader.path()));
  }
  std::vector<ModelTensor> out;
  for (const std::string& tensor : order) {
    auto total = totals.find(tensor);
    if (total == totals.end()) {
      return absl::NotFoundError(
          absl::StrFormat("checkpoint %s: tensor '%s' of its layout has no param/%s state",
                          reader.path(), tensor, tensor));
    }
    ModelTensor t;
    t.name = tensor;
    const std::string name = std::string(kParamPrefix) + tensor;
    // Nothing is allocated for a tensor before the files are known to hold it: a manifest
    // re-signed to claim 2^40 elements is refused here, not by std::bad_alloc.
    const auto holder = first_worker_of.find(name);
    const std::string first_worker =
        holder == first_worker_of.end() ? std::string() : WorkerProcess(holder->second);
    const int64_t held = reader.ElementsHeld(first_worker, name);  // "": every process's
    if (held < total->second) return NotWhole(reader, name, held, total->second);
    t.values.resize(static_cast<size_t>(total->second));
    absl::Status s = ReadReplicated(reader, name, total->second, 0, t.values);
    if (absl::IsNotFound(s)) {
      auto assembled = Assemble(reader, name, total->second);
      if (!assembled.ok()) return assembled.status();
      t.values = *std::move(assembled);
    } else if (!s.ok()) {
      return s;
    }
    t.shape = shapes[tensor];
    int64_t elements = 1;
    for (int64_t d : t.shape) {
      // Saturating: a shape that overflows is not this tensor's.
      elements = d <= 0 || elements > kMaxElements / d ? -1 : elements * d;
      if (elements < 0) break;
    }
    if (t.shape.empty() || elements != total->second) t.shape = {total->second};
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace herd::checkpoint
