#include "checkpoint/manifest_check.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "checkpoint/checkpoint_id.h"
#include "checkpoint/state_file.h"
#include "common/dtype.h"

namespace herd::checkpoint {
namespace {

absl::Status Bad(const std::string& path, const std::string& what) {
  return absl::DataLossError(absl::StrFormat("%s: %s", path, what));
}

bool InRange(int64_t v) { return v >= 0 && v <= kMaxElements; }

// The extent's own fields, before any two are compared.
absl::Status CheckExtent(const herd::v1::CheckpointFile& f, const herd::v1::CheckpointExtent& e,
                         const std::string& path) {
  auto dtype = ParseDType(e.dtype());
  if (!dtype.ok()) {
    return Bad(path, absl::StrFormat("%s: extent %s has dtype '%s'", f.file(), DescribeExtent(e),
                                     e.dtype().substr(0, 16)));
  }
  if (!InRange(e.total()) || !InRange(e.offset()) || !InRange(e.count()) ||
      e.offset() + e.count() > e.total()) {
    return Bad(path, absl::StrFormat("%s: extent %s claims elements [%d, %d) of a tensor of %d (at "
                                     "most %d elements)",
                                     f.file(), DescribeExtent(e), e.offset(),
                                     e.offset() + e.count(), e.total(), kMaxElements));
  }
  // count <= 2^40 and sizes <= 8: no overflow.
  const int64_t want = e.count() * static_cast<int64_t>(DTypeSize(*dtype));
  if (e.bytes() != want || e.byte_offset() < kStateHeaderBytes || e.byte_offset() > f.bytes() ||
      e.bytes() > f.bytes() - e.byte_offset()) {
    return Bad(path, absl::StrFormat("%s: extent %s (%s, %d of %d elements, %d bytes) does not "
                                     "fit the file of %d bytes",
                                     f.file(), DescribeExtent(e), e.dtype(), e.count(), e.total(),
                                     e.bytes(), f.bytes()));
  }
  return absl::OkStatus();
}

// No byte of the file belongs to two extents, and no element of a name to two of its extents.
absl::Status CheckOverlaps(const herd::v1::CheckpointFile& f, const std::string& path) {
  std::vector<const herd::v1::CheckpointExtent*> by_byte;
  for (const auto& e : f.extents()) {
    if (e.bytes() > 0) by_byte.push_back(&e);
  }
  std::sort(by_byte.begin(), by_byte.end(),
            [](auto* a, auto* b) { return a->byte_offset() < b->byte_offset(); });
  for (size_t i = 1; i < by_byte.size(); ++i) {
    const auto& prev = *by_byte[i - 1];
    if (by_byte[i]->byte_offset() < prev.byte_offset() + prev.bytes()) {
      return Bad(path, absl::StrFormat("%s: extents %s and %s overlap in the file", f.file(),
                                       DescribeExtent(prev), DescribeExtent(*by_byte[i])));
    }
  }
  std::vector<const herd::v1::CheckpointExtent*> by_element;
  for (const auto& e : f.extents()) {
    if (e.count() > 0) by_element.push_back(&e);
  }
  std::sort(by_element.begin(), by_element.end(), [](auto* a, auto* b) {
    return a->name() != b->name() ? a->name() < b->name() : a->offset() < b->offset();
  });
  for (size_t i = 1; i < by_element.size(); ++i) {
    const auto& prev = *by_element[i - 1];
    const auto& e = *by_element[i];
    if (e.name() != prev.name()) continue;
    if (e.total() != prev.total() || e.dtype() != prev.dtype()) {
      return Bad(path, absl::StrFormat("%s: extents of '%s' disagree on the tensor: %s of %d "
                                       "elements and %s of %d",
                                       f.file(), e.name(), prev.dtype(), prev.total(), e.dtype(),
                                       e.total()));
    }
    if (e.offset() < prev.offset() + prev.count()) {
      return Bad(path, absl::StrFormat("%s: extents %s and %s overlap in the tensor's elements",
                                       f.file(), DescribeExtent(prev), DescribeExtent(e)));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckLayout(const herd::v1::CheckpointManifest& m, const std::string& path) {
  if (m.layout_size() > kMaxTensors) {
    return Bad(path, absl::StrFormat("the layout lists %d tensors, more than %d", m.layout_size(),
                                     kMaxTensors));
  }
  std::set<std::string> names;
  for (const auto& t : m.layout()) {
    const std::string name = t.name().substr(0, 80);
    if (t.name().size() > kMaxNameBytes) {
      return Bad(path, absl::StrFormat("tensor '%s...' of the layout has a name of %d bytes (at "
                                       "most %d)",
                                       name, t.name().size(), kMaxNameBytes));
    }
    if (!names.insert(t.name()).second) {
      return Bad(path, absl::StrFormat("the layout lists tensor '%s' twice", name));
    }
    if (!InRange(t.count())) {
      return Bad(path, absl::StrFormat("tensor '%s' of the layout has %d elements (at most %d)",
                                       name, t.count(), kMaxElements));
    }
    if (t.shape_size() > kMaxTensorRank) {
      return Bad(path, absl::StrFormat("tensor '%s' of the layout has %d dimensions (at most %d)",
                                       name, t.shape_size(), kMaxTensorRank));
    }
    if (t.shape_size() > 0) {
      int64_t product = 1;
      for (int64_t d : t.shape()) {
        // Checked before multiplying: the product stays <= 2^40.
        if (d < 0 || (d > 0 && product > kMaxElements / d)) {
          return Bad(path, absl::StrFormat("tensor '%s' of the layout has dimension %d", name, d));
        }
        product *= d;
      }
      if (product != t.count()) {
        return Bad(path, absl::StrFormat("tensor '%s' of the layout has %d elements, but its shape "
                                         "makes %d",
                                         name, t.count(), product));
      }
    }
    if (!t.dtype().empty() && !ParseDType(t.dtype()).ok()) {
      return Bad(path, absl::StrFormat("tensor '%s' of the layout has dtype '%s'", name,
                                       t.dtype().substr(0, 16)));
    }
  }
  return absl::OkStatus();
}

// The data position a resumed worker reads from its file (worker/session_checkpoint.cc writes
// it): a negative or absurd one would make the worker loop or index outside its samples.
absl::Status CheckDataPosition(const herd::v1::CheckpointFile& f, const std::string& path) {
  for (const char* key : {"data/epoch", "data/offset"}) {
    const auto it = f.values().find(key);
    if (it == f.values().end()) continue;
    int64_t v = 0;
    if (!absl::SimpleAtoi(it->second, &v) || !InRange(v)) {
      return Bad(path,
                 absl::StrFormat("%s: value %s is '%s', not an integer in [0, %d]", f.file(), key,
                                 absl::CHexEscape(it->second.substr(0, 40)), kMaxElements));
    }
  }
  return absl::OkStatus();
}

// The rank of process `name` ("worker-3" with prefix "worker-": 3); nullopt for another
// prefix or a malformed rank.
std::optional<int> RankOf(std::string_view name, std::string_view prefix) {
  if (!name.starts_with(prefix)) return std::nullopt;
  const std::string_view digits = name.substr(prefix.size());
  int rank = -1;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
  if (error != std::errc() || end != digits.data() + digits.size() || rank < 0) return std::nullopt;
  return rank;
}

}  // namespace

absl::Status CheckManifest(const herd::v1::CheckpointManifest& m, const std::string& path) {
  const auto iteration = ParseCheckpointId(m.id());
  if (!iteration.has_value() || *iteration != m.iteration()) {
    return Bad(path, absl::StrFormat("the manifest's id '%s' does not name its iteration %d",
                                     m.id().substr(0, 40), m.iteration()));
  }
  if (m.iteration() < 0 || m.iteration() > kMaxIteration) {
    return Bad(path, absl::StrFormat("the manifest resumes at iteration %d (at most %d)",
                                     m.iteration(), kMaxIteration));
  }
  if (m.workers() < 0 || m.workers() > kMaxProcesses || m.shards() < 0 ||
      m.shards() > kMaxProcesses) {
    return Bad(path, absl::StrFormat("the manifest counts %d workers and %d shards (each at most "
                                     "%d)",
                                     m.workers(), m.shards(), kMaxProcesses));
  }
  if (absl::Status s = CheckLayout(m, path); !s.ok()) return s;
  for (const auto& f : m.files()) {
    for (const auto& e : f.extents()) {
      if (e.name().size() > kMaxNameBytes) {
        return Bad(path, absl::StrFormat("%s: an extent's name has %d bytes (at most %d)", f.file(),
                                         e.name().size(), kMaxNameBytes));
      }
    }
    if (f.bytes() < kStateHeaderBytes) {
      return Bad(path, absl::StrFormat("%s has %d bytes, less than a state file's header", f.file(),
                                       f.bytes()));
    }
    for (const auto& e : f.extents()) {
      if (absl::Status s = CheckExtent(f, e, path); !s.ok()) return s;
    }
    if (absl::Status s = CheckOverlaps(f, path); !s.ok()) return s;
    if (absl::Status s = CheckDataPosition(f, path); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status CheckCoverage(const herd::v1::CheckpointManifest& m, const std::string& path) {
  // One pass over every extent (a manifest may list millions), indexed by tensor.
  std::map<std::string, int64_t> count;  // layout tensor -> its elements
  for (const auto& t : m.layout()) count.emplace(t.name(), t.count());
  struct Held {
    std::vector<std::pair<int64_t, int64_t>> ranges;  // [from, to) over every process
    std::map<int, int64_t> per_worker_file;           // elements in each worker's file
  };
  std::map<std::string, Held> held;
  constexpr std::string_view kParam = "param/";
  for (int i = 0; i < m.files_size(); ++i) {
    const auto& f = m.files(i);
    // Only what a resume and `export` read counts: fp32 parameters of the workers and shards
    // the manifest counts (they look processes up by rank, below workers() and shards()).
    const std::optional<int> worker = RankOf(f.process(), "worker-");
    const std::optional<int> shard = RankOf(f.process(), "shard-");
    if (!(worker.has_value() && *worker < m.workers()) &&
        !(shard.has_value() && *shard < m.shards())) {
      continue;
    }
    for (const auto& e : f.extents()) {
      if (!e.name().starts_with(kParam) || e.dtype() != "fp32") continue;
      auto c = count.find(e.name().substr(kParam.size()));
      if (c == count.end()) continue;
      if (e.total() != c->second) {
        return Bad(path, absl::StrFormat("%s holds '%s' as a tensor of %d elements; the layout "
                                         "has %d",
                                         f.file(), e.name().substr(0, 90), e.total(), c->second));
      }
      Held& h = held[c->first];
      if (e.count() > 0) h.ranges.emplace_back(e.offset(), e.offset() + e.count());
      if (worker.has_value()) h.per_worker_file[i] += e.count();
    }
  }
  for (const auto& t : m.layout()) {
    Held& h = held[t.name()];
    bool whole = t.count() == 0;
    for (const auto& [file, n] : h.per_worker_file) whole |= n == t.count();
    if (whole) continue;
    std::sort(h.ranges.begin(), h.ranges.end());
    int64_t covered = 0, reach = 0;
    for (const auto& [from, to] : h.ranges) {
      if (to <= reach) continue;
      covered += to - std::max(from, reach);
      reach = to;
    }
    if (covered != t.count()) {
      return Bad(path, absl::StrFormat("the parameters of tensor '%s' are not whole: the "
                                       "checkpoint holds %d of its %d elements (param/%s)",
                                       t.name().substr(0, 80), covered, t.count(),
                                       t.name().substr(0, 80)));
    }
  }
  return absl::OkStatus();
}

}  // namespace herd::checkpoint
