#pragma once
// Per-layer profiles of real models for the DeAR replay: the parameter tensors of each layer
// (in registration = forward order) and the forward and backward compute time of the layer.
//
// Tensor sizes are exact (ResNet-50: 161 tensors, 25,557,032 parameters; BERT-Base for
// pre-training: 206 tensors, 110,106,428 parameters: Table I of the DeAR paper). Compute times
// are not given per layer anywhere; a profile spreads the model's total forward and backward
// time over its layers in proportion to each layer's work (multiply-accumulates, with
// element-wise layers costed per output element), see resnet50_profile.cc and
// bert_profile.cc. The totals default to what Table II of the paper implies for its GPUs
// (docs/dear.md derives them).

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace herd::emulator {

struct LayerProfile {
  std::string name;
  std::vector<std::string> tensor_names;
  std::vector<size_t> tensor_counts;  // fp32 elements, forward order
  double forward_s = 0;
  double backward_s = 0;
};

struct ModelProfile {
  std::string name;
  std::vector<LayerProfile> layers;  // forward order

  size_t tensors() const;
  size_t parameters() const;
  double forward_s() const;
  double backward_s() const;
  // Scales every layer's compute time (a slower or faster device, or a dilated clock).
  void ScaleCompute(double factor);
};

// A layer being built: its tensors and its work in arbitrary units (MACs or equivalents).
struct LayerWork {
  std::string name;
  std::vector<std::pair<std::string, size_t>> tensors;
  double work = 0;
};

// Spreads `forward_s` and `backward_s` over the layers in proportion to their work.
ModelProfile DistributeCompute(std::string name, const std::vector<LayerWork>& layers,
                               double forward_s, double backward_s);

// Compute times implied by Table II of the DeAR paper (S^max on 64 GPUs over 10GbE, with
// t_bp = 2 t_ff); docs/dear.md shows the arithmetic.
inline constexpr double kResNet50ForwardS = 0.0733;
inline constexpr double kResNet50BackwardS = 0.1467;
inline constexpr double kBertBaseForwardS = 0.0936;
inline constexpr double kBertBaseBackwardS = 0.1872;

ModelProfile ResNet50Profile(double forward_s = kResNet50ForwardS,
                             double backward_s = kResNet50BackwardS);
ModelProfile BertBaseProfile(double forward_s = kBertBaseForwardS,
                             double backward_s = kBertBaseBackwardS);

// "resnet50" | "bert-base" with their default times; INVALID_ARGUMENT naming the choices.
absl::StatusOr<ModelProfile> ModelByName(std::string_view name);

}  // namespace herd::emulator
