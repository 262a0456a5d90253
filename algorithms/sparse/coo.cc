#include "algorithms/sparse/coo.h"

#include <cstring>

#include "absl/strings/str_format.h"

namespace herd::sparse {
namespace {

constexpr size_t kEntryBytes = sizeof(uint32_t) + sizeof(float);

}  // namespace

size_t FrameBytes(absl::Span<const CooBlock* const> blocks) {
  size_t bytes = blocks.size() * sizeof(uint32_t);
  for (const CooBlock* b : blocks) bytes += b->size() * kEntryBytes;
  return bytes;
}

size_t MaxFrameBytes(size_t blocks, size_t max_entries) {
  return blocks * (sizeof(uint32_t) + max_entries * kEntryBytes);
}

void EncodeFrame(absl::Span<const CooBlock* const> blocks, std::vector<std::byte>* out) {
  out->resize(FrameBytes(blocks));
  std::byte* p = out->data();
  for (const CooBlock* b : blocks) {
    const uint32_t n = static_cast<uint32_t>(b->size());
    std::memcpy(p, &n, sizeof n);
    p += sizeof n;
  }
  for (const CooBlock* b : blocks) {
    if (b->empty()) continue;
    std::memcpy(p, b->index.data(), b->size() * sizeof(uint32_t));
    p += b->size() * sizeof(uint32_t);
    std::memcpy(p, b->value.data(), b->size() * sizeof(float));
    p += b->size() * sizeof(float);
  }
}

absl::Status DecodeFrame(ConstBytes frame, size_t max_entries, absl::Span<const size_t> limits,
                         absl::Span<CooBlock* const> blocks) {
  const size_t n = blocks.size();
  if (frame.size() < n * sizeof(uint32_t)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a frame of %u blocks of %u bytes is shorter than its header", n, frame.size()));
  }
  std::vector<uint32_t> counts(n);
  if (n > 0) std::memcpy(counts.data(), frame.data(), n * sizeof(uint32_t));
  size_t expected = n * sizeof(uint32_t);
  for (size_t b = 0; b < n; ++b) {
    if (counts[b] > max_entries) {
      return absl::InvalidArgumentError(
          absl::StrFormat("block %u of a frame has %u entries, more than the %u allowed", b,
                          counts[b], max_entries));
    }
    expected += counts[b] * kEntryBytes;
  }
  if (frame.size() != expected) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a frame of %u bytes, expected %u for its %u blocks", frame.size(), expected, n));
  }
  const std::byte* p = frame.data() + n * sizeof(uint32_t);
  for (size_t b = 0; b < n; ++b) {
    CooBlock& out = *blocks[b];
    out.index.resize(counts[b]);
    out.value.resize(counts[b]);
    if (counts[b] == 0) continue;
    std::memcpy(out.index.data(), p, counts[b] * sizeof(uint32_t));
    p += counts[b] * sizeof(uint32_t);
    std::memcpy(out.value.data(), p, counts[b] * sizeof(float));
    p += counts[b] * sizeof(float);
    // Ascending and in range: checking the last index bounds all of them.
    for (size_t i = 1; i < out.index.size(); ++i) {
      if (out.index[i] <= out.index[i - 1]) {
        return absl::InvalidArgumentError(
            absl::StrFormat("block %u of a frame has index %u after %u (indices must ascend)", b,
                            out.index[i], out.index[i - 1]));
      }
    }
    if (out.index.back() >= limits[b]) {
      return absl::InvalidArgumentError(
          absl::StrFormat("block %u of a frame has index %u, beyond its length %u", b,
                          out.index.back(), limits[b]));
    }
  }
  return absl::OkStatus();
}

void MergeSum(const CooBlock& a, const CooBlock& b, CooBlock* out) {
  out->clear();
  out->index.reserve(a.size() + b.size());
  out->value.reserve(a.size() + b.size());
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (a.index[i] < b.index[j]) {
      out->Add(a.index[i], a.value[i]);
      ++i;
    } else if (b.index[j] < a.index[i]) {
      out->Add(b.index[j], b.value[j]);
      ++j;
    } else {
      out->Add(a.index[i], a.value[i] + b.value[j]);
      ++i;
      ++j;
    }
  }
  for (; i < a.size(); ++i) out->Add(a.index[i], a.value[i]);
  for (; j < b.size(); ++j) out->Add(b.index[j], b.value[j]);
}

}  // namespace herd::sparse
