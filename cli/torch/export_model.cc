#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "checkpoint/catalog.h"
#include "checkpoint/export.h"
#include "checkpoint/reader.h"
#include "checkpoint/torch/save_torch.h"
#include "cli/checkpoint_export.h"
#include "cli/command.h"
#include "common/printable.h"

namespace herd::cli {
namespace {

int Fail(const absl::Status& s) {
  // Messages quote names and values from the files: escaped (common/printable.h).
  std::fprintf(stderr, "herd checkpoint export: %s\n", Printable(s.ToString()).c_str());
  return kExitFailure;
}

}  // namespace

int ExportModel(const std::string& path, const std::string& out) {
  using checkpoint::PosixEnv;
  // A named checkpoint is verified whole first (a directory is, by OpenCheckpoint), so no
  // model is exported from a checkpoint with any damage.
  if (checkpoint::IsCheckpointPath(PosixEnv(), path)) {
    absl::Status s = checkpoint::VerifyCheckpoint(PosixEnv(), path);
    if (!s.ok()) return Fail(s);
  }
  auto reader = checkpoint::OpenCheckpoint(PosixEnv(), path);
  if (!reader.ok()) return Fail(reader.status());
  for (const auto& why : (*reader)->skipped()) {
    std::fprintf(stderr, "skipped %s\n", Printable(why).c_str());
  }
  auto tensors = checkpoint::ModelParameters(**reader);
  if (!tensors.ok()) return Fail(tensors.status());
  absl::Status s = checkpoint::SaveTorchStateDict(PosixEnv(), *tensors, out);
  if (!s.ok()) return Fail(s);
  int64_t elements = 0;
  for (const auto& t : *tensors) elements += static_cast<int64_t>(t.values.size());
  std::printf("exported %d tensors (%lld parameters) of checkpoint %s to %s\n",
              static_cast<int>(tensors->size()), static_cast<long long>(elements),
              (*reader)->path().c_str(), out.c_str());
  return kExitOk;
}

}  // namespace herd::cli
