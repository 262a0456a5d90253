#include "algorithms/sparse/working_vector.h"

namespace herd::sparse {

void WorkingVector::TakeTopK(size_t begin, size_t length, size_t k, TopkMethod method,
                             CooBlock* out, TopkScratch* scratch) {
  SelectTopK(view(begin, length), k, method, &scratch->positions, scratch);
  out->clear();
  out->index.reserve(scratch->positions.size());
  out->value.reserve(scratch->positions.size());
  for (uint32_t p : scratch->positions) {
    out->Add(p, w_[begin + p]);
    Record(begin + p);
    w_[begin + p] = 0;
  }
}

void WorkingVector::Add(size_t begin, const CooBlock& c, float scale) {
  for (size_t e = 0; e < c.size(); ++e) {
    const size_t i = begin + c.index[e];
    Record(i);
    w_[i] += c.value[e] * scale;
  }
}

void WorkingVector::RestoreOutside(absl::Span<const CooBlock> keep,
                                   absl::Span<const size_t> begins) {
  // Set the kept values aside, undo every change (the earliest recorded value of an index is
  // restored last, so x wins), then put the kept values back.
  std::vector<float> kept;
  for (size_t b = 0; b < keep.size(); ++b) {
    for (uint32_t i : keep[b].index) kept.push_back(w_[begins[b] + i]);
  }
  for (size_t n = changed_.size(); n-- > 0;) w_[changed_[n]] = before_[n];
  size_t next = 0;
  for (size_t b = 0; b < keep.size(); ++b) {
    for (uint32_t i : keep[b].index) w_[begins[b] + i] = kept[next++];
  }
  changed_.clear();
  before_.clear();
}

}  // namespace herd::sparse
