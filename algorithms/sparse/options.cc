// Names and validation of the sparse all-reduce options (sparse_allreduce.h, validate.h).

#include <cmath>
#include <functional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "algorithms/sparse/schedule.h"
#include "algorithms/sparse/sparse_allreduce.h"
#include "algorithms/sparse/validate.h"
#include "algorithms/sparse/wire.h"

namespace herd::sparse {

std::string_view SagAlgorithmName(SagAlgorithm a) {
  switch (a) {
    case SagAlgorithm::kAuto:
      return "auto";
    case SagAlgorithm::kRecursive:
      return "rsag";
    case SagAlgorithm::kBruck:
      return "bsag";
  }
  return "unknown";
}

absl::StatusOr<SagAlgorithm> ParseSagAlgorithm(std::string_view name) {
  std::string n = absl::AsciiStrToLower(std::string(name));
  if (n == "auto") return SagAlgorithm::kAuto;
  if (n == "rsag" || n == "r-sag" || n == "recursive") return SagAlgorithm::kRecursive;
  if (n == "bsag" || n == "b-sag" || n == "bruck") return SagAlgorithm::kBruck;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown SAG algorithm '", std::string(name), "'; expected auto, rsag or bsag"));
}

size_t BlockK(size_t block_elements, double density) {
  const double k = std::round(static_cast<double>(block_elements) * density);
  return k < 1 ? 1 : static_cast<size_t>(k);
}

absl::Status ValidateSparseOptions(std::string_view what, const SparseAllReduceOptions& o,
                                   bool teams_apply) {
  auto invalid = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: %s", what, why));
  };
  if (absl::Status s = collectives::ValidateCommon(o, o.data, o.count); !s.ok()) {
    return invalid(std::string(s.message()));
  }
  if (o.dtype != DType::kFloat32) {
    return invalid(absl::StrFormat("dtype must be fp32, got %s", DTypeName(o.dtype)));
  }
  if (o.count > 0 && o.residual == nullptr) {
    return invalid(absl::StrFormat("residual is null but count is %u", o.count));
  }
  // The residual is read and written beside data throughout: they must not share memory.
  if (o.count > 0 && std::less<const float*>()(o.data, o.residual + o.count) &&
      std::less<const float*>()(o.residual, o.data + o.count)) {
    return invalid("data and residual overlap");
  }
  if (!(o.density > 0 && o.density <= 1)) {  // NaN fails too
    return invalid(absl::StrFormat("density must lie in (0, 1], got %g", o.density));
  }
  if (o.topk != TopkMethod::kExact && o.topk != TopkMethod::kSampled) {
    return invalid(absl::StrFormat("unknown top-k method %d", static_cast<int>(o.topk)));
  }
  if (o.comm->memory() != transport::MemoryKind::kHost) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s needs host memory, but the %s communicator holds device memory", what,
                        o.comm->backend()));
  }
  const int P = o.comm->size();
  if (P > static_cast<int>(kMaxPhaseStep) + 1) {
    return invalid(absl::StrFormat("%d ranks: at most %u are supported", P, kMaxPhaseStep + 1));
  }
  size_t block = o.count;
  if (teams_apply) {
    if (o.teams < 1 || P % o.teams != 0) {
      return invalid(absl::StrFormat("teams must divide the %d ranks, got %d", P, o.teams));
    }
    if (o.sag != SagAlgorithm::kAuto && o.sag != SagAlgorithm::kRecursive &&
        o.sag != SagAlgorithm::kBruck) {
      return invalid(absl::StrFormat("unknown SAG algorithm %d", static_cast<int>(o.sag)));
    }
    if (o.sag == SagAlgorithm::kRecursive && !IsPowerOfTwo(o.teams)) {
      return invalid(absl::StrFormat(
          "R-SAG needs a power-of-two number of teams, got %d (use bsag or auto)", o.teams));
    }
    const size_t team_size = static_cast<size_t>(P / o.teams);
    block = (o.count + team_size - 1) / team_size;
  }
  // Indices on the wire are 32-bit offsets within a block.
  if (block > UINT32_MAX) {
    return invalid(absl::StrFormat(
        "blocks of %u elements exceed the 32-bit indices (use more ranks per team, or split the "
        "tensor)",
        block));
  }
  return absl::OkStatus();
}

}  // namespace herd::sparse
