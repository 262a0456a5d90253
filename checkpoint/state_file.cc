#include "checkpoint/state_file.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "checkpoint/checksum.h"
#include "checkpoint/commit.h"
#include "checkpoint/manifest_check.h"
#include "common/dtype.h"

namespace herd::checkpoint {
namespace {

int64_t AlignUp(int64_t n) {
  return (n + kExtentAlignment - 1) / kExtentAlignment * kExtentAlignment;
}

std::string Header(int64_t extents) {
  std::string h(kStateHeaderBytes, '\0');
  std::memcpy(h.data(), kStateMagic, sizeof(kStateMagic));
  const uint32_t version = kFormatVersion;
  for (int i = 0; i < 4; ++i) h[8 + i] = static_cast<char>((version >> (8 * i)) & 0xff);
  for (int i = 0; i < 8; ++i)
    h[16 + i] = static_cast<char>((static_cast<uint64_t>(extents) >> (8 * i)) & 0xff);
  return h;
}

absl::Status CheckExtent(const ProcessState& state, const Extent& e) {
  const size_t size = DTypeSize(e.dtype);
  if (e.bytes.size() % size != 0 || e.offset < 0 || e.total < 0 || e.offset + e.count() > e.total) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: extent '%s' of %d bytes (%s) at element %d does not fit a tensor of %d elements",
        state.process, e.name, e.bytes.size(), DTypeName(e.dtype), e.offset, e.total));
  }
  return absl::OkStatus();
}

}  // namespace

std::string DescribeExtent(const herd::v1::CheckpointExtent& e) {
  // In unsigned arithmetic: a hostile record's values must not overflow even its message.
  auto end = [](int64_t a, int64_t b) {
    return static_cast<uint64_t>(a) + static_cast<uint64_t>(b);
  };
  return absl::StrFormat("'%s' [%d, %d) at bytes [%d, %d)", e.name().substr(0, 160), e.offset(),
                         end(e.offset(), e.count()), e.byte_offset(),
                         end(e.byte_offset(), e.bytes()));
}

int64_t StateFileBytes(const ProcessState& state) {
  int64_t at = kStateHeaderBytes;
  for (const Extent& e : state.extents) at = AlignUp(at) + static_cast<int64_t>(e.bytes.size());
  return at;
}

absl::StatusOr<herd::v1::CheckpointFile> WriteStateFileAt(Env& env, const std::string& path,
                                                          const std::string& file_name,
                                                          const ProcessState& state) {
  if (state.process.empty()) return absl::InvalidArgumentError("a state without a process name");
  for (const Extent& e : state.extents) {
    absl::Status s = CheckExtent(state, e);
    if (!s.ok()) return s;
  }
  const int64_t size = StateFileBytes(state);
  const std::string parent = path.substr(0, path.rfind('/'));
  auto free = env.FreeBytes(parent);
  if (free.ok() && *free < static_cast<uint64_t>(size)) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("%s: %d bytes to write, %d free on its file system", path, size, *free));
  }

  herd::v1::CheckpointFile record;
  record.set_process(state.process);
  record.set_file(file_name);
  for (const auto& [key, value] : state.values) (*record.mutable_values())[key] = value;

  auto written = [&]() -> absl::Status {
    auto file = env.NewWritableFile(path);
    if (!file.ok()) return file.status();
    StreamingChecksum whole;
    int64_t at = 0;
    auto append = [&](std::string_view data) {
      whole.Update(data);
      at += static_cast<int64_t>(data.size());
      return (*file)->Append(data);
    };
    absl::Status s = append(Header(static_cast<int64_t>(state.extents.size())));
    static const std::string kZeros(kExtentAlignment, '\0');
    for (const Extent& e : state.extents) {
      if (!s.ok()) break;
      const int64_t pad = AlignUp(at) - at;
      if (pad > 0) s = append(std::string_view(kZeros).substr(0, pad));
      if (!s.ok()) break;
      herd::v1::CheckpointExtent* x = record.add_extents();
      x->set_name(e.name);
      x->set_dtype(std::string(DTypeName(e.dtype)));
      x->set_total(e.total);
      x->set_offset(e.offset);
      x->set_count(e.count());
      x->set_byte_offset(at);
      x->set_bytes(static_cast<int64_t>(e.bytes.size()));
      x->set_checksum(Checksum(e.bytes));
      s = append(e.bytes);
    }
    if (s.ok()) s = (*file)->Sync();
    absl::Status closed = (*file)->Close();
    if (s.ok()) s = closed;
    record.set_bytes(at);
    record.set_checksum(whole.Digest());
    return s;
  }();
  if (!written.ok()) {
    (void)env.RemoveAll(path);  // free the room a partial file takes; the error is what matters
    return written;
  }
  return record;
}

absl::StatusOr<std::string> ReadExtent(const RandomAccessFile& reader, const std::string& path,
                                       const herd::v1::CheckpointExtent& e) {
  if (e.byte_offset() < 0 || e.bytes() < 0 ||
      static_cast<uint64_t>(e.byte_offset()) > reader.size() ||
      static_cast<uint64_t>(e.bytes()) > reader.size() - static_cast<uint64_t>(e.byte_offset())) {
    return absl::DataLossError(
        absl::StrFormat("%s: extent %s lies past the end of the file (%d bytes)", path,
                        DescribeExtent(e), reader.size()));
  }
  std::string bytes(static_cast<size_t>(e.bytes()), '\0');
  absl::Status s = reader.Read(static_cast<uint64_t>(e.byte_offset()), bytes.size(), bytes.data());
  if (!s.ok()) return s;
  const uint64_t actual = Checksum(bytes);
  if (actual != e.checksum()) {
    return absl::DataLossError(
        absl::StrFormat("%s: extent %s: checksum expected %s, the bytes "
                        "differ",
                        path, DescribeExtent(e), ChecksumHex(e.checksum())));
  }
  return bytes;
}

absl::Status VerifyStateFile(Env& env, const std::string& checkpoint_path,
                             const herd::v1::CheckpointFile& file) {
  const std::string path = JoinPath(checkpoint_path, file.file());
  auto opened = env.NewRandomAccessFile(path);
  if (!opened.ok()) {
    if (absl::IsNotFound(opened.status())) {
      return absl::DataLossError(absl::StrFormat("%s is missing (%s's state, %d bytes)", path,
                                                 file.process(), file.bytes()));
    }
    return opened.status();
  }
  const RandomAccessFile& reader = **opened;
  if (reader.size() != static_cast<uint64_t>(file.bytes())) {
    return absl::DataLossError(absl::StrFormat("%s: size expected %d bytes, actual %d", path,
                                               file.bytes(), reader.size()));
  }
  // The extents in file order, each checked for bounds and its dtype first.
  std::vector<const herd::v1::CheckpointExtent*> extents;
  for (const auto& e : file.extents()) {
    auto dtype = ParseDType(e.dtype());
    // Written so that nothing overflows whatever the record says (CheckManifest checked it
    // too, for every reader).
    const bool fits =
        e.byte_offset() >= kStateHeaderBytes && e.bytes() >= 0 && e.byte_offset() <= file.bytes() &&
        e.bytes() <= file.bytes() - e.byte_offset() && dtype.ok() && e.count() >= 0 &&
        e.count() <= kMaxElements &&
        e.bytes() == e.count() * static_cast<int64_t>(DTypeSize(*dtype)) && e.offset() >= 0 &&
        e.total() <= kMaxElements && e.offset() <= e.total() && e.count() <= e.total() - e.offset();
    if (!fits) {
      return absl::DataLossError(
          absl::StrFormat("%s: extent %s (%s, %d of %d elements) does not fit the file", path,
                          DescribeExtent(e), e.dtype(), e.count(), e.total()));
    }
    extents.push_back(&e);
  }
  // Empty extents hold no bytes: each checksum is that of nothing, checked here once, so that
  // a manifest listing millions of them costs one pass over them, not one per chunk.
  const herd::v1::CheckpointExtent* bad = nullptr;
  const uint64_t of_nothing = StreamingChecksum().Digest();
  std::erase_if(extents, [&](const herd::v1::CheckpointExtent* e) {
    if (e->bytes() != 0) return false;
    if (e->checksum() != of_nothing && bad == nullptr) bad = e;
    return true;
  });
  std::sort(extents.begin(), extents.end(),
            [](auto* a, auto* b) { return a->byte_offset() < b->byte_offset(); });
  // The others share no byte (CheckManifest refuses overlaps; checked again here, since this
  // pass relies on it): at most one is open at a time, so one running checksum serves them
  // all and memory does not grow with their number.
  for (size_t i = 1; i < extents.size(); ++i) {
    if (extents[i]->byte_offset() < extents[i - 1]->byte_offset() + extents[i - 1]->bytes()) {
      return absl::DataLossError(absl::StrFormat("%s: extents %s and %s overlap", path,
                                                 DescribeExtent(*extents[i - 1]),
                                                 DescribeExtent(*extents[i])));
    }
  }

  // One pass over the file: the file's checksum and, for each extent, its own.
  constexpr int64_t kChunk = 4 << 20;
  std::string buf;
  StreamingChecksum whole;
  StreamingChecksum open_sum;  // of extents[next], the one being read
  size_t next = 0;
  for (int64_t at = 0; at < file.bytes();) {
    const int64_t n = std::min(kChunk, file.bytes() - at);
    buf.resize(static_cast<size_t>(n));
    absl::Status s = reader.Read(static_cast<uint64_t>(at), buf.size(), buf.data());
    if (!s.ok()) return s;
    whole.Update(buf);
    while (next < extents.size() && extents[next]->byte_offset() < at + n) {
      const auto& e = *extents[next];
      const int64_t lo = std::max(at, e.byte_offset());
      const int64_t hi = std::min(at + n, e.byte_offset() + e.bytes());
      open_sum.Update(std::string_view(buf).substr(lo - at, hi - lo));
      if (hi < e.byte_offset() + e.bytes()) break;  // goes on in the next chunk
      if (open_sum.Digest() != e.checksum() && bad == nullptr) bad = &e;
      open_sum = StreamingChecksum();
      ++next;
    }
    at += n;
  }
  if (bad != nullptr) {
    return absl::DataLossError(
        absl::StrFormat("%s: extent %s: checksum expected %s, the bytes differ", path,
                        DescribeExtent(*bad), ChecksumHex(bad->checksum())));
  }
  const uint64_t actual = whole.Digest();
  if (actual != file.checksum()) {
    return absl::DataLossError(absl::StrFormat("%s: checksum expected %s, the bytes differ", path,
                                               ChecksumHex(file.checksum())));
  }
  return absl::OkStatus();
}

}  // namespace herd::checkpoint
