#include "algorithms/sparse/working_vector.h"

namespace herd::sparse {

void WorkingVector::TakeTopK(int b, size_t k, TopkMethod method, CooBlock* out,
                             TopkScratch* scratch) {
  const size_t begin = layout_.begin(b), length = layout_.length(b);
  absl::Span<float> w(w_ + begin, length);
  if (ready_[b]) {
    SelectTopK(w, k, method, &scratch->positions, scratch);
  } else {
    SelectTopKOfSum(w, absl::Span<float>(g_ + begin, length), k, method, &scratch->positions,
                    scratch);
    ready_[b] = true;
  }
  out->clear();
  out->index.reserve(scratch->positions.size());
  out->value.reserve(scratch->positions.size());
  for (uint32_t p : scratch->positions) {
    out->Add(p, w[p]);
    Record(begin + p, w[p]);
    w[p] = 0;
  }
}

void WorkingVector::Add(int b, const CooBlock& c, float scale) {
  const size_t begin = layout_.begin(b);
  for (size_t e = 0; e < c.size(); ++e) {
    const size_t i = begin + c.index[e];
    // Before materialisation x is w + g: the same single addition the materialising pass does.
    Record(i, ready_[b] ? w_[i] : w_[i] + g_[i]);
    w_[i] += c.value[e] * scale;
  }
}

void WorkingVector::Replay() {
  // Backwards, so that the earliest recorded value of an index, its x, is written last.
  for (size_t n = changed_.size(); n-- > 0;) w_[changed_[n]] = before_[n];
  changed_.clear();
  before_.clear();
}

void WorkingVector::RestoreOutside(absl::Span<const CooBlock> keep) {
  // Set the kept values aside, undo every change, then put the kept values back.
  std::vector<float> kept;
  for (size_t b = 0; b < keep.size(); ++b) {
    for (uint32_t i : keep[b].index) kept.push_back(w_[layout_.begin(static_cast<int>(b)) + i]);
  }
  Replay();
  size_t next = 0;
  for (size_t b = 0; b < keep.size(); ++b) {
    for (uint32_t i : keep[b].index) w_[layout_.begin(static_cast<int>(b)) + i] = kept[next++];
  }
}

void WorkingVector::RestoreAll() {
  // Materialising a block that received pairs puts garbage at their indices; the replay that
  // follows overwrites exactly those with x.
  for (int b = 0; b < layout_.blocks; ++b) {
    if (ready_[b]) continue;
    const size_t begin = layout_.begin(b), end = begin + layout_.length(b);
    for (size_t i = begin; i < end; ++i) {
      w_[i] += g_[i];
      g_[i] = 0;
    }
    ready_[b] = true;
  }
  Replay();
}

}  // namespace herd::sparse
