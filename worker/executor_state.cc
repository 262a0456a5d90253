#include "worker/executor_state.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "server/shard_extents.h"
#include "worker/fused_buckets.h"

namespace herd::worker {

using checkpoint::StateSource;
using checkpoint::WorkerProcess;

std::string StateName(std::string_view kind, std::string_view tensor) {
  std::string name(kind);
  name += '/';
  name += tensor;
  return name;
}

ImportWhere WhereOf(const ExecutorContext& context) {
  int world = context.plan.world_size();
  if (world <= 0) world = context.comm != nullptr ? context.comm->size() : 1;
  return ImportWhere{context.rank, world};
}

namespace {

bool AnyWorkerHolds(const StateSource& from, std::string_view name) {
  for (int r = 0; r < from.workers(); ++r) {
    if (from.Has(WorkerProcess(r), name)) return true;
  }
  return false;
}

// The sum over the old workers that hold `name` (each element has one non-zero holder).
absl::Status ReadSum(const StateSource& from, std::string_view name, std::span<float> out) {
  std::vector<float> one(out.size());
  std::fill(out.begin(), out.end(), 0.0f);
  for (int r = 0; r < from.workers(); ++r) {
    if (!from.Has(WorkerProcess(r), name)) continue;
    HERD_RETURN_IF_ERROR(from.Read(WorkerProcess(r), name, static_cast<int64_t>(out.size()), 0,
                                   std::span<float>(one)));
    for (size_t i = 0; i < out.size(); ++i) out[i] += one[i];
  }
  return absl::OkStatus();
}

// Replicated state that only the parameter-server shards kept (their optimizer slots, in a
// checkpoint of a ps_* mode): "<kind>/<tensor>" from the shards' key ranges.
absl::StatusOr<bool> ReadFromShards(const StateSource& from, std::string_view name,
                                    std::span<float> out) {
  const size_t slash = name.find('/');
  if (slash == std::string_view::npos) return false;
  HERD_ASSIGN_OR_RETURN(std::vector<server::SavedKey> keys, server::SavedShardKeys(from));
  if (keys.empty()) return false;
  std::vector<float> read(out.size());
  HERD_ASSIGN_OR_RETURN(
      bool held,
      server::ReadFromShards(from, keys, std::string(name.substr(slash + 1)), std::string(name),
                             static_cast<int64_t>(out.size()), 0, read));
  if (held) std::copy(read.begin(), read.end(), out.begin());
  return held;
}

}  // namespace

absl::StatusOr<bool> ReadState(const StateSource& from, std::string_view name, Reshard rule,
                               ImportWhere where, std::span<float> out) {
  if (!AnyWorkerHolds(from, name)) {
    return rule == Reshard::kReplicated ? ReadFromShards(from, name, out) : false;
  }
  const auto total = static_cast<int64_t>(out.size());
  // Into a copy: a failed read leaves `out` as it was.
  std::vector<float> read(out.size());
  const bool same_world = from.workers() == where.world;
  const bool own = same_world && from.Has(WorkerProcess(where.rank), name);
  switch (rule) {
    case Reshard::kReplicated:
      HERD_RETURN_IF_ERROR(own ? from.Read(WorkerProcess(where.rank), name, total, 0, read)
                               : checkpoint::ReadReplicated(from, name, total, 0, read));
      break;
    case Reshard::kMean:
      HERD_RETURN_IF_ERROR(
          checkpoint::ReadOwnOrMean(from, name, total, 0, where.rank, where.world, read));
      break;
    case Reshard::kAverage:
      HERD_RETURN_IF_ERROR(
          checkpoint::ReadOwnOrAverage(from, name, total, 0, where.rank, where.world, read));
      break;
    case Reshard::kSum:
      HERD_RETURN_IF_ERROR(own ? from.Read(WorkerProcess(where.rank), name, total, 0, read)
                               : ReadSum(from, name, read));
      break;
  }
  std::copy(read.begin(), read.end(), out.begin());
  return true;
}

std::optional<std::string> ReadValue(const StateSource& from, std::string_view key,
                                     ImportWhere where) {
  if (from.workers() == where.world) {
    if (auto v = from.Value(WorkerProcess(where.rank), key)) return v;
  }
  for (int r = 0; r < from.workers(); ++r) {
    if (auto v = from.Value(WorkerProcess(r), key)) return v;
  }
  return std::nullopt;
}

std::optional<int64_t> ReadIntValue(const StateSource& from, std::string_view key,
                                    ImportWhere where) {
  std::optional<std::string> text = ReadValue(from, key, where);
  int64_t v = 0;
  if (!text || !absl::SimpleAtoi(*text, &v)) return std::nullopt;
  return v;
}

absl::Status RunAll(std::vector<absl::StatusOr<ImportStep>> steps) {
  for (const auto& s : steps) HERD_RETURN_IF_ERROR(s.status());
  for (auto& s : steps) {
    if (*s) (*s)();
  }
  return absl::OkStatus();
}

absl::StatusOr<ImportStep> Combine(std::vector<absl::StatusOr<ImportStep>> steps) {
  std::vector<ImportStep> all;
  for (auto& s : steps) {
    HERD_RETURN_IF_ERROR(s.status());
    all.push_back(std::move(*s));
  }
  return ImportStep([all = std::move(all)] {
    for (const auto& s : all) {
      if (s) s();
    }
  });
}

std::vector<TensorPlace> PlacesIn(const FusedBuckets& buckets, size_t tensors) {
  std::vector<TensorPlace> places(tensors);
  for (int b = 0; b < buckets.buckets(); ++b) {
    size_t offset = 0;
    for (int t : buckets.TensorsOf(b)) {
      places[t] = {b, offset};
      offset += buckets.CountOf(t);
    }
  }
  return places;
}

std::vector<TensorPlace> FlatPlaces(const std::vector<ModelTensor>& tensors) {
  std::vector<TensorPlace> places;
  size_t offset = 0;
  for (const ModelTensor& t : tensors) {
    places.push_back({0, offset});
    offset += t.count;
  }
  return places;
}

void ExportPlaced(checkpoint::ProcessState& out, std::string_view kind,
                  const std::vector<ModelTensor>& tensors, const std::vector<TensorPlace>& places,
                  const std::vector<std::vector<float>>& buffers, std::string_view suffix) {
  for (size_t t = 0; t < tensors.size(); ++t) {
    const auto& buffer = buffers[places[t].buffer];
    checkpoint::AddExtent(
        out, StateName(kind, tensors[t].name) + std::string(suffix),
        static_cast<int64_t>(tensors[t].count), 0,
        std::span<const float>(buffer.data() + places[t].offset, tensors[t].count));
  }
}

absl::StatusOr<ImportStep> ImportPlaced(const StateSource& from, std::string_view kind,
                                        Reshard rule, ImportWhere where,
                                        const std::vector<ModelTensor>& tensors,
                                        const std::vector<TensorPlace>& places,
                                        std::vector<std::vector<float>>* buffers,
                                        std::string_view suffix) {
  auto copy = std::make_shared<std::vector<std::vector<float>>>(*buffers);
  for (size_t t = 0; t < tensors.size(); ++t) {
    auto& buffer = (*copy)[places[t].buffer];
    HERD_RETURN_IF_ERROR(
        ReadState(from, StateName(kind, tensors[t].name) + std::string(suffix), rule, where,
                  std::span<float>(buffer.data() + places[t].offset, tensors[t].count))
            .status());
  }
  return ImportStep([copy, buffers] {
    for (size_t b = 0; b < copy->size(); ++b) {
      std::copy((*copy)[b].begin(), (*copy)[b].end(), (*buffers)[b].begin());
    }
  });
}

absl::StatusOr<checkpoint::ProcessState> TakeExecutorState(Executor& old, int rank) {
  HERD_RETURN_IF_ERROR(old.Flush());
  checkpoint::ProcessState state;
  state.process = WorkerProcess(rank);
  HERD_RETURN_IF_ERROR(old.ExportState(state));
  return state;
}

absl::Status GiveExecutorState(Executor& next, checkpoint::ProcessState state, int world) {
  std::vector<checkpoint::ProcessState> states;
  states.push_back(std::move(state));
  const checkpoint::MemoryStateSource source(std::move(states), world);
  return next.ImportState(source);
}

void ExportParams(checkpoint::ProcessState& out, const std::vector<ModelTensor>& tensors) {
  for (const ModelTensor& t : tensors) {
    checkpoint::AddExtent(out, StateName("param", t.name), static_cast<int64_t>(t.count), 0,
                          std::span<const float>(t.param, t.count));
  }
}

absl::Status ImportParams(const StateSource& from, ImportWhere where,
                          const std::vector<ModelTensor>& tensors, MissingParams missing) {
  const Reshard rule =
      ReadValue(from, kPerRankModels, where) ? Reshard::kAverage : Reshard::kReplicated;
  std::vector<std::vector<float>> read;
  std::vector<bool> found;
  for (const ModelTensor& t : tensors) {
    read.emplace_back(t.param, t.param + t.count);
    HERD_ASSIGN_OR_RETURN(bool held,
                          ReadState(from, StateName("param", t.name), rule, where, read.back()));
    found.push_back(held);
    if (!held && t.count > 0 && missing == MissingParams::kRefuse) {
      return absl::DataLossError(absl::StrFormat(
          "no worker or shard of the checkpoint holds the parameters of tensor '%s' (param/%s)",
          t.name, t.name));
    }
  }
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (found[t]) std::memcpy(tensors[t].param, read[t].data(), tensors[t].count * sizeof(float));
  }
  return absl::OkStatus();
}

}  // namespace herd::worker
