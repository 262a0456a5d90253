#include "bench/dear/model_profile.h"

#include "absl/strings/str_format.h"

namespace herd::emulator {

size_t ModelProfile::tensors() const {
  size_t n = 0;
  for (const LayerProfile& l : layers) n += l.tensor_counts.size();
  return n;
}

size_t ModelProfile::parameters() const {
  size_t n = 0;
  for (const LayerProfile& l : layers) {
    for (size_t c : l.tensor_counts) n += c;
  }
  return n;
}

double ModelProfile::forward_s() const {
  double s = 0;
  for (const LayerProfile& l : layers) s += l.forward_s;
  return s;
}

double ModelProfile::backward_s() const {
  double s = 0;
  for (const LayerProfile& l : layers) s += l.backward_s;
  return s;
}

void ModelProfile::ScaleCompute(double factor) {
  for (LayerProfile& l : layers) {
    l.forward_s *= factor;
    l.backward_s *= factor;
  }
}

ModelProfile DistributeCompute(std::string name, const std::vector<LayerWork>& layers,
                               double forward_s, double backward_s) {
  double total = 0;
  for (const LayerWork& l : layers) total += l.work;
  ModelProfile model{std::move(name), {}};
  for (const LayerWork& l : layers) {
    LayerProfile p;
    p.name = l.name;
    for (const auto& [tensor, count] : l.tensors) {
      p.tensor_names.push_back(tensor);
      p.tensor_counts.push_back(count);
    }
    const double share = total > 0 ? l.work / total : 0.0;
    p.forward_s = forward_s * share;
    p.backward_s = backward_s * share;
    model.layers.push_back(std::move(p));
  }
  return model;
}

absl::StatusOr<ModelProfile> ModelByName(std::string_view name) {
  if (name == "resnet50") return ResNet50Profile();
  if (name == "bert-base") return BertBaseProfile();
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown model '%s' (resnet50, bert-base)", std::string(name)));
}

}  // namespace herd::emulator
