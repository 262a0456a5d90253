// BERT-Base for pre-training (Hugging Face's BertForPreTraining layout, the DeAR paper's
// model): embeddings, 12 encoder layers of hidden size h = 768 (FFN 3072, 12 heads), the
// pooler, and the two heads (masked LM with its decoder tied to the word embeddings, and next
// sentence prediction): 206 tensors, in the order the forward pass uses them. Sentences of s = 64
// tokens.
//
// One replay layer per module that owns tensors. Work per token, in multiply-accumulates:
// a dense layer in x out; self-attention's Q, K, V projections plus its score and context
// products (2 s h); layer norm, GELU and the embedding lookups at kElementCost per element
// (memory-bound, as in resnet50_profile.cc). The masked-LM head runs on the masked 15% of the
// tokens only (transform h^2 and the tied decoder h x vocab); pooler and next-sentence head
// on one token per sentence.

#include "absl/strings/str_format.h"
#include "bench/dear/model_profile.h"

namespace herd::emulator {
namespace {

constexpr double kElementCost = 100.0;
constexpr size_t kHidden = 768, kFfn = 3072, kVocab = 30522, kPositions = 512;
constexpr double kSeq = 64, kMasked = 0.15;

LayerWork Dense(const std::string& name, size_t in, size_t out, double tokens_share = 1.0) {
  LayerWork l;
  l.name = name;
  l.tensors = {{name + ".weight", in * out}, {name + ".bias", out}};
  l.work = tokens_share * double(in) * out;
  return l;
}

LayerWork LayerNorm(const std::string& name, double tokens_share = 1.0) {
  LayerWork l;
  l.name = name;
  l.tensors = {{name + ".weight", kHidden}, {name + ".bias", kHidden}};
  l.work = tokens_share * kElementCost * kHidden;
  return l;
}

}  // namespace

ModelProfile BertBaseProfile(double forward_s, double backward_s) {
  std::vector<LayerWork> layers;
  LayerWork emb;
  emb.name = "bert.embeddings";
  emb.tensors = {{"bert.embeddings.word_embeddings.weight", kVocab * kHidden},
                 {"bert.embeddings.position_embeddings.weight", kPositions * kHidden},
                 {"bert.embeddings.token_type_embeddings.weight", 2 * kHidden}};
  emb.work = 3 * kElementCost * kHidden;  // three lookups and their sum
  layers.push_back(std::move(emb));
  layers.push_back(LayerNorm("bert.embeddings.LayerNorm"));
  for (int i = 0; i < 12; ++i) {
    const std::string p = absl::StrFormat("bert.encoder.layer.%d.", i);
    LayerWork self;
    self.name = p + "attention.self";
    for (const char* proj : {"query", "key", "value"}) {
      self.tensors.push_back({p + "attention.self." + proj + ".weight", kHidden * kHidden});
      self.tensors.push_back({p + "attention.self." + proj + ".bias", kHidden});
    }
    self.work = 3.0 * kHidden * kHidden + 2.0 * kSeq * kHidden + kElementCost * kSeq * 12;
    layers.push_back(std::move(self));
    layers.push_back(Dense(p + "attention.output.dense", kHidden, kHidden));
    layers.push_back(LayerNorm(p + "attention.output.LayerNorm"));
    LayerWork inter = Dense(p + "intermediate.dense", kHidden, kFfn);
    inter.work += kElementCost * kFfn;  // GELU
    layers.push_back(std::move(inter));
    layers.push_back(Dense(p + "output.dense", kFfn, kHidden));
    layers.push_back(LayerNorm(p + "output.LayerNorm"));
  }
  layers.push_back(Dense("bert.pooler.dense", kHidden, kHidden, 1.0 / kSeq));
  // In the order the heads compute (Hugging Face registers the MLM bias before the
  // transform; the set of tensors is the same).
  layers.push_back(Dense("cls.predictions.transform.dense", kHidden, kHidden, kMasked));
  layers.push_back(LayerNorm("cls.predictions.transform.LayerNorm", kMasked));
  // The decoder's weight is the word embedding (tied; its gradient is complete only when
  // backward reaches the embeddings): the decoder's work lands on the MLM bias, the only
  // tensor of its own.
  LayerWork mlm;
  mlm.name = "cls.predictions";
  mlm.tensors = {{"cls.predictions.bias", kVocab}};
  mlm.work = kMasked * double(kHidden) * kVocab;
  layers.push_back(std::move(mlm));
  layers.push_back(Dense("cls.seq_relationship", kHidden, 2, 1.0 / kSeq));
  return DistributeCompute("bert-base", layers, forward_s, backward_s);
}

}  // namespace herd::emulator
