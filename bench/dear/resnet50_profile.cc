// ResNet-50 (torchvision's layout, v1.5: the stride of a downsampling bottleneck is on its 3x3
// convolution) on 224x224 images: 53 convolutions each followed by batch norm, and the
// fully connected classifier. One replay layer per convolution with its batch norm (tensors:
// conv weight, bn weight, bn bias; convolutions have no bias), plus the classifier (weight,
// bias): 161 tensors in torchvision's registration order.
//
// Work of a layer, per image: the convolution's multiply-accumulates (H_out W_out k^2 C_in
// C_out) plus its batch norm and ReLU at kElementCost per output element. Batch norm is
// memory-bound: on the paper's GPUs (13.4 TFLOP/s fp32, 616 GB/s) reading and writing an fp32
// element twice costs about what 100 multiply-accumulates do at a convolution's typical
// efficiency, which makes batch norm about a fifth of the time, as profilers report.

#include "absl/strings/str_format.h"
#include "bench/dear/model_profile.h"

namespace herd::emulator {
namespace {

constexpr double kElementCost = 100.0;

class Builder {
 public:
  // A convolution + batch norm layer; `spatial` is the output's side length.
  void ConvBn(const std::string& conv, const std::string& bn, int c_in, int c_out, int k,
              int spatial) {
    const double outputs = double(spatial) * spatial * c_out;
    LayerWork l;
    l.name = conv;
    l.tensors = {{conv + ".weight", size_t(c_out) * c_in * k * k},
                 {bn + ".weight", size_t(c_out)},
                 {bn + ".bias", size_t(c_out)}};
    l.work = outputs * k * k * c_in + kElementCost * outputs;
    layers.push_back(std::move(l));
  }
  std::vector<LayerWork> layers;
};

}  // namespace

ModelProfile ResNet50Profile(double forward_s, double backward_s) {
  Builder b;
  b.ConvBn("conv1", "bn1", 3, 64, 7, 112);
  const int blocks[4] = {3, 4, 6, 3};
  int in = 64, spatial = 56;  // after the max pool
  for (int stage = 0; stage < 4; ++stage) {
    const int planes = 64 << stage, out = planes * 4;
    for (int i = 0; i < blocks[stage]; ++i) {
      const std::string p = absl::StrFormat("layer%d.%d.", stage + 1, i);
      const int stride = (i == 0 && stage > 0) ? 2 : 1;
      const int s_out = spatial / stride;
      b.ConvBn(p + "conv1", p + "bn1", in, planes, 1, spatial);
      b.ConvBn(p + "conv2", p + "bn2", planes, planes, 3, s_out);
      b.ConvBn(p + "conv3", p + "bn3", planes, out, 1, s_out);
      if (i == 0) b.ConvBn(p + "downsample.0", p + "downsample.1", in, out, 1, s_out);
      in = out;
      spatial = s_out;
    }
  }
  LayerWork fc;
  fc.name = "fc";
  fc.tensors = {{"fc.weight", size_t{2048} * 1000}, {"fc.bias", 1000}};
  fc.work = 2048.0 * 1000;
  b.layers.push_back(std::move(fc));
  return DistributeCompute("resnet50", b.layers, forward_s, backward_s);
}

}  // namespace herd::emulator
