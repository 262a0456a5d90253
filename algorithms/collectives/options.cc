#include "algorithms/collectives/options.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace herd::collectives {

std::string_view AlgorithmName(Algorithm a) {
  switch (a) {
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kLinearPipeline:
      return "lp";
    case Algorithm::kRecursiveDoubling:
      return "rd";
    case Algorithm::kBruck:
      return "bruck";
    case Algorithm::kBinomialTree:
      return "tree";
    case Algorithm::kPairwise:
      return "pairwise";
    case Algorithm::kNative:
      return "native";
    case Algorithm::kRecursiveHalving:
      return "rh";
    case Algorithm::kOneShot:
      return "oneshot";
    case Algorithm::kAuto:
      return "auto";
    case Algorithm::kShm:
      return "shm";
    case Algorithm::kHierarchical:
      return "hier";
  }
  return "unknown";
}

absl::StatusOr<Algorithm> ParseAlgorithm(std::string_view name) {
  std::string n = absl::AsciiStrToLower(std::string(name));
  if (n == "ring") return Algorithm::kRing;
  if (n == "lp" || n == "linear_pipeline" || n == "linear-pipeline")
    return Algorithm::kLinearPipeline;
  if (n == "rd" || n == "recursive_doubling" || n == "recursive-doubling")
    return Algorithm::kRecursiveDoubling;
  if (n == "bruck") return Algorithm::kBruck;
  if (n == "tree" || n == "binomial" || n == "mst") return Algorithm::kBinomialTree;
  if (n == "pairwise") return Algorithm::kPairwise;
  if (n == "native") return Algorithm::kNative;
  if (n == "rh" || n == "recursive_halving" || n == "recursive-halving" || n == "rabenseifner")
    return Algorithm::kRecursiveHalving;
  if (n == "oneshot" || n == "one_shot" || n == "one-shot") return Algorithm::kOneShot;
  if (n == "auto") return Algorithm::kAuto;
  if (n == "shm" || n == "shared_memory" || n == "shared-memory") return Algorithm::kShm;
  if (n == "hier" || n == "hierarchical") return Algorithm::kHierarchical;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown algorithm '", std::string(name),
      "'; expected auto, ring, lp, rd, rh, oneshot, bruck, tree, pairwise, shm, hier or "
      "native"));
}

absl::Status ValidateCommon(const CommonOptions& o, const void* data, size_t count) {
  if (o.comm == nullptr) return absl::InvalidArgumentError("collective options: comm is null");
  if (o.tag > transport::Tag::kMaxId) {
    return absl::InvalidArgumentError(absl::StrCat(
        "collective options: tag ", o.tag, " exceeds the largest id ", transport::Tag::kMaxId));
  }
  if (count > 0 && data == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("collective options: data is null but count is ", count));
  }
  if (o.timeout.count() <= 0) {
    return absl::InvalidArgumentError("collective options: timeout must be positive");
  }
  return absl::OkStatus();
}

}  // namespace herd::collectives
