// The group's staging buffer: where a list-form call (all_gather into a list, reduce_scatter
// from a list, the coalesced calls) lays its tensors out end to end for herd's collective, which
// works on one contiguous buffer.
//
// Kept for the group's life and grown, never shrunk, because a fresh buffer costs more than the
// collective: glibc serves blocks above 32 MiB with a new mmap, and touching its pages for the
// first time ran at about 0.3 GB/s on the machines of docs/BENCHMARKS.md (64 MiB: 200 ms to
// allocate and fill, against 25 ms for herd's all-gather of it). A rank therefore holds, per
// process group, one buffer as large as its largest list-form call's payload (docs/python.md).
//
// Used by the group's one worker thread only; a tensor Take returns is valid until the next Take.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace herd::python::c10d_backend {

class Staging {
 public:
  // A contiguous 1-D tensor of `numel` elements of `like`'s dtype, in the kept buffer; its
  // contents are whatever the last call left.
  at::Tensor Take(int64_t numel, const at::TensorOptions& like) {
    const int64_t bytes =
        numel * static_cast<int64_t>(c10::elementSize(like.dtype().toScalarType()));
    if (!buffer_.defined() || buffer_.numel() < bytes) {
      buffer_ = at::Tensor();  // the old one goes first: the peak is the new size, not both
      buffer_ = at::empty({bytes}, at::TensorOptions().dtype(at::kByte));
    }
    return at::from_blob(buffer_.data_ptr(), {numel}, like.device(at::kCPU));
  }

 private:
  at::Tensor buffer_;  // bytes
};

}  // namespace herd::python::c10d_backend
