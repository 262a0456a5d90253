#include "checkpoint/state_source.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"

namespace herd::checkpoint {

std::string WorkerProcess(int rank) { return absl::StrFormat("worker-%d", rank); }
std::string ShardProcess(int shard) { return absl::StrFormat("shard-%d", shard); }
std::string CutKey(const std::string& id, const std::string& process) {
  return absl::StrFormat("checkpoint/%s/%s", id, process);
}

MemoryStateSource::MemoryStateSource(std::vector<ProcessState> states, int workers)
    : states_(std::move(states)), workers_(workers) {}

const ProcessState* MemoryStateSource::Find(std::string_view process) const {
  for (const auto& s : states_) {
    if (s.process == process) return &s;
  }
  return nullptr;
}

bool MemoryStateSource::Has(std::string_view process, std::string_view name) const {
  const ProcessState* s = Find(process);
  if (s == nullptr) return false;
  return std::any_of(s->extents.begin(), s->extents.end(),
                     [&](const Extent& e) { return e.name == name; });
}

absl::Status MemoryStateSource::Read(std::string_view process, std::string_view name, int64_t total,
                                     int64_t offset, std::span<float> out) const {
  const ProcessState* s = Find(process);
  if (s == nullptr || !Has(process, name)) {
    return absl::NotFoundError(absl::StrFormat("%s holds no state '%s'", process, name));
  }
  const int64_t end = offset + static_cast<int64_t>(out.size());
  int64_t covered = 0;
  for (const Extent& e : s->extents) {
    if (e.name != name) continue;
    if (e.dtype != DType::kFloat32 || e.total != total) {
      return absl::FailedPreconditionError(
          absl::StrFormat("state '%s' of %s is %s of %d elements, expected fp32 of %d", name,
                          process, DTypeName(e.dtype), e.total, total));
    }
    const int64_t lo = std::max(offset, e.offset), hi = std::min(end, e.offset + e.count());
    if (lo >= hi) continue;
    std::memcpy(out.data() + (lo - offset), e.bytes.data() + (lo - e.offset) * sizeof(float),
                static_cast<size_t>(hi - lo) * sizeof(float));
    covered += hi - lo;
  }
  if (covered < end - offset) {
    return absl::OutOfRangeError(
        absl::StrFormat("state '%s' of %s covers %d of the elements [%d, %d)", name, process,
                        covered, offset, end));
  }
  return absl::OkStatus();
}

std::optional<std::string> MemoryStateSource::Value(std::string_view process,
                                                    std::string_view key) const {
  const ProcessState* s = Find(process);
  if (s == nullptr) return std::nullopt;
  auto it = s->values.find(std::string(key));
  if (it == s->values.end()) return std::nullopt;
  return it->second;
}

absl::Status ReadReplicated(const StateSource& from, std::string_view name, int64_t total,
                            int64_t offset, std::span<float> out) {
  for (int r = 0; r < from.workers(); ++r) {
    if (from.Has(WorkerProcess(r), name)) {
      return from.Read(WorkerProcess(r), name, total, offset, out);
    }
  }
  return absl::NotFoundError(absl::StrFormat("no worker holds state '%s'", name));
}

namespace {

// The mean of `name` over the old workers that hold it.
absl::Status ReadMean(const StateSource& from, std::string_view name, int64_t total, int64_t offset,
                      std::span<float> out) {
  std::vector<float> sum(out.size(), 0.0f), one(out.size());
  int holders = 0;
  for (int r = 0; r < from.workers(); ++r) {
    if (!from.Has(WorkerProcess(r), name)) continue;
    if (auto st = from.Read(WorkerProcess(r), name, total, offset, one); !st.ok()) return st;
    for (size_t i = 0; i < one.size(); ++i) sum[i] += one[i];
    ++holders;
  }
  if (holders == 0) return absl::NotFoundError(absl::StrFormat("no worker holds state '%s'", name));
  for (size_t i = 0; i < out.size(); ++i) out[i] = sum[i] / static_cast<float>(holders);
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadOwnOrMean(const StateSource& from, std::string_view name, int64_t total,
                           int64_t offset, int rank, int world, std::span<float> out) {
  if (from.workers() == world && from.Has(WorkerProcess(rank), name)) {
    return from.Read(WorkerProcess(rank), name, total, offset, out);
  }
  return ReadMean(from, name, total, offset, out);
}

absl::Status ReadOwnOrAverage(const StateSource& from, std::string_view name, int64_t total,
                              int64_t offset, int rank, int world, std::span<float> out) {
  return ReadOwnOrMean(from, name, total, offset, rank, world, out);
}

void AddExtent(ProcessState& state, std::string name, int64_t total, int64_t offset,
               std::span<const float> values) {
  Extent e;
  e.name = std::move(name);
  e.dtype = DType::kFloat32;
  e.total = total;
  e.offset = offset;
  e.bytes.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  state.extents.push_back(std::move(e));
}

}  // namespace herd::checkpoint
