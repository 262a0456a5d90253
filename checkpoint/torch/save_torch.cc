#include "checkpoint/torch/save_torch.h"

#include <ATen/ATen.h>
#include <ATen/core/Dict.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <cstring>
#include <exception>

#include "absl/strings/str_format.h"

namespace herd::checkpoint {

absl::Status SaveTorchStateDict(Env& env, const std::vector<ModelTensor>& tensors,
                                const std::string& path) {
  std::vector<char> bytes;
  try {
    c10::Dict<std::string, at::Tensor> dict;
    for (const ModelTensor& t : tensors) {
      at::Tensor x = at::empty(t.shape, at::TensorOptions().dtype(at::kFloat));
      if (static_cast<size_t>(x.numel()) != t.values.size()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: %d values for a shape of %d elements", t.name, t.values.size(), x.numel()));
      }
      std::memcpy(x.data_ptr<float>(), t.values.data(), t.values.size() * sizeof(float));
      dict.insert(t.name, x);
    }
    bytes = torch::jit::pickle_save(c10::IValue(dict));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrFormat("saving %s in torch's format: %s", path, e.what()));
  }
  const std::string tmp = path + ".tmp";
  absl::Status s = env.WriteFile(tmp, std::string_view(bytes.data(), bytes.size()));
  if (s.ok()) s = env.Rename(tmp, path);
  if (!s.ok()) (void)env.RemoveAll(tmp);
  return s;
}

}  // namespace herd::checkpoint
