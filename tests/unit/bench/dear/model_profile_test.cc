#include "bench/dear/model_profile.h"

#include <gtest/gtest.h>

#include <set>

namespace herd::emulator {
namespace {

// Table I of the DeAR paper: ResNet-50 161 tensors, 25.6 M parameters; BERT-Base 206
// tensors, 110.1 M parameters. The exact totals are torchvision's and Hugging Face's.
TEST(ModelProfileTest, ResNet50HasTheTensorsOfTableI) {
  const ModelProfile m = ResNet50Profile();
  EXPECT_EQ(m.tensors(), 161u);
  EXPECT_EQ(m.parameters(), 25'557'032u);
  EXPECT_EQ(m.layers.size(), 54u);  // 53 conv + bn, the classifier
  EXPECT_EQ(m.layers.front().tensor_names.front(), "conv1.weight");
  EXPECT_EQ(m.layers.back().tensor_names.back(), "fc.bias");
}

TEST(ModelProfileTest, BertBaseHasTheTensorsOfTableI) {
  const ModelProfile m = BertBaseProfile();
  EXPECT_EQ(m.tensors(), 206u);
  EXPECT_EQ(m.parameters(), 110'106'428u);
  EXPECT_EQ(m.layers.front().tensor_names.front(), "bert.embeddings.word_embeddings.weight");
}

TEST(ModelProfileTest, ComputeTimesAddUpAndFollowTheWork) {
  for (const ModelProfile& m : {ResNet50Profile(0.3, 0.6), BertBaseProfile(0.3, 0.6)}) {
    SCOPED_TRACE(m.name);
    EXPECT_NEAR(m.forward_s(), 0.3, 1e-9);
    EXPECT_NEAR(m.backward_s(), 0.6, 1e-9);
    std::set<std::string> names;
    for (const LayerProfile& l : m.layers) {
      EXPECT_GT(l.forward_s, 0) << l.name;
      EXPECT_NEAR(l.backward_s, 2 * l.forward_s, 1e-12) << l.name;
      EXPECT_EQ(l.tensor_names.size(), l.tensor_counts.size());
      for (const std::string& n : l.tensor_names) EXPECT_TRUE(names.insert(n).second) << n;
    }
  }
  // Where the work is: every encoder layer of BERT costs the same; among ResNet's stages the
  // third (six blocks) costs most, the fourth holds most of the parameters with a fifth of
  // the work.
  const ModelProfile bert = BertBaseProfile(1, 2);
  double encoder0 = 0, encoder11 = 0;
  for (const LayerProfile& l : bert.layers) {
    if (l.name.starts_with("bert.encoder.layer.0.")) encoder0 += l.forward_s;
    if (l.name.starts_with("bert.encoder.layer.11.")) encoder11 += l.forward_s;
  }
  EXPECT_NEAR(encoder0, encoder11, 1e-12);
  EXPECT_GT(encoder0, 0.06);
  const ModelProfile resnet = ResNet50Profile(1, 2);
  double stage[5] = {0, 0, 0, 0, 0};
  size_t params[5] = {0, 0, 0, 0, 0};
  for (const LayerProfile& l : resnet.layers) {
    const int s = l.name.starts_with("layer") ? l.name[5] - '0' : 0;
    stage[s] += l.forward_s;
    for (size_t c : l.tensor_counts) params[s] += c;
  }
  EXPECT_GT(stage[3], stage[1]);
  EXPECT_GT(stage[3], stage[2]);
  EXPECT_GT(stage[3], stage[4]);
  EXPECT_NEAR(stage[4], 0.2, 0.06);
  EXPECT_GT(params[4], resnet.parameters() / 2);
}

TEST(ModelProfileTest, ScalingAndLookup) {
  ModelProfile m = ResNet50Profile();
  EXPECT_NEAR(m.forward_s(), kResNet50ForwardS, 1e-9);
  m.ScaleCompute(10);
  EXPECT_NEAR(m.backward_s(), 10 * kResNet50BackwardS, 1e-9);
  EXPECT_EQ(ModelByName("bert-base")->tensors(), 206u);
  EXPECT_EQ(ModelByName("vgg16").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace herd::emulator
