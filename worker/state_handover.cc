#include "worker/state_handover.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "common/bytes.h"
#include "common/status.h"
#include "transport/tag.h"

namespace herd::worker {
namespace {

using transport::OpKind;
using transport::Tag;

// The encoding (every integer little-endian, as the workers of one job run the same build on
// the same architecture):
//   "HERDHAND" u64 extents, then per extent: u32 name bytes, name, u8 dtype, i64 total,
//   i64 offset, u64 data bytes, data; u64 values, then per value: u32 key bytes, key,
//   u64 value bytes, value.
constexpr char kMagic[8] = {'H', 'E', 'R', 'D', 'H', 'A', 'N', 'D'};
constexpr uint8_t kMaxDType = static_cast<uint8_t>(DType::kUInt8);
// Tags: id 0 the joining flags, id 1 a state (step 0 its size, steps 1.. its chunks).
constexpr uint32_t kFlagsId = 0;
constexpr uint32_t kStateId = 1;
// Chunks keep each message of a large model a bounded size for the transport.
constexpr size_t kChunkBytes = size_t{16} << 20;

template <typename T>
void Put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}
void PutString(std::string& out, std::string_view s, bool wide) {
  if (wide) {
    Put<uint64_t>(out, s.size());
  } else {
    Put<uint32_t>(out, static_cast<uint32_t>(s.size()));
  }
  out.append(s);
}

// Reads from a byte string, refusing to run past its end.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <typename T>
  absl::StatusOr<T> Get(std::string_view what) {
    if (in_.size() - at_ < sizeof(T)) return Short(what, sizeof(T));
    T v;
    std::memcpy(&v, in_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  absl::StatusOr<std::string> GetString(std::string_view what, bool wide) {
    uint64_t n = 0;
    if (wide) {
      HERD_ASSIGN_OR_RETURN(n, Get<uint64_t>(what));
    } else {
      HERD_ASSIGN_OR_RETURN(n, Get<uint32_t>(what));
    }
    if (in_.size() - at_ < n) return Short(what, n);
    std::string s(in_.substr(at_, n));
    at_ += n;
    return s;
  }
  bool done() const { return at_ == in_.size(); }
  size_t at() const { return at_; }

 private:
  absl::Status Short(std::string_view what, uint64_t need) const {
    return absl::DataLossError(
        absl::StrFormat("handed-over state: %s needs %d bytes at byte %d, only %d are left", what,
                        need, at_, in_.size() - at_));
  }
  std::string_view in_;
  size_t at_ = 0;
};

}  // namespace

std::string EncodeState(const checkpoint::ProcessState& state) {
  size_t bytes = sizeof kMagic + 16;
  for (const auto& e : state.extents) bytes += e.name.size() + e.bytes.size() + 33;
  for (const auto& [k, v] : state.values) bytes += k.size() + v.size() + 12;
  std::string out;
  out.reserve(bytes);
  out.append(kMagic, sizeof kMagic);
  Put<uint64_t>(out, state.extents.size());
  for (const auto& e : state.extents) {
    PutString(out, e.name, false);
    Put<uint8_t>(out, static_cast<uint8_t>(e.dtype));
    Put<int64_t>(out, e.total);
    Put<int64_t>(out, e.offset);
    PutString(out, e.bytes, true);
  }
  Put<uint64_t>(out, state.values.size());
  for (const auto& [k, v] : state.values) {
    PutString(out, k, false);
    PutString(out, v, true);
  }
  return out;
}

absl::StatusOr<checkpoint::ProcessState> DecodeState(std::string_view bytes) {
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    return absl::DataLossError(absl::StrFormat(
        "handed-over state of %d bytes does not start with the handover marker", bytes.size()));
  }
  Reader in(bytes.substr(sizeof kMagic));
  checkpoint::ProcessState state;
  HERD_ASSIGN_OR_RETURN(uint64_t extents, in.Get<uint64_t>("the extent count"));
  for (uint64_t i = 0; i < extents; ++i) {
    checkpoint::Extent e;
    HERD_ASSIGN_OR_RETURN(e.name, in.GetString("an extent's name", false));
    HERD_ASSIGN_OR_RETURN(uint8_t dtype, in.Get<uint8_t>("an extent's dtype"));
    if (dtype > kMaxDType) {
      return absl::DataLossError(
          absl::StrFormat("handed-over extent '%s' has unknown dtype %d", e.name, dtype));
    }
    e.dtype = static_cast<DType>(dtype);
    HERD_ASSIGN_OR_RETURN(e.total, in.Get<int64_t>("an extent's length"));
    HERD_ASSIGN_OR_RETURN(e.offset, in.Get<int64_t>("an extent's offset"));
    HERD_ASSIGN_OR_RETURN(e.bytes, in.GetString("an extent's data", true));
    const int64_t count = e.count();
    if (e.bytes.size() % DTypeSize(e.dtype) != 0 || e.offset < 0 || e.total < 0 ||
        e.offset > e.total || count > e.total - e.offset) {
      return absl::DataLossError(absl::StrFormat(
          "handed-over extent '%s': elements [%d, %d) of %d do not fit (%d bytes of %s)", e.name,
          e.offset, e.offset + count, e.total, e.bytes.size(), DTypeName(e.dtype)));
    }
    state.extents.push_back(std::move(e));
  }
  HERD_ASSIGN_OR_RETURN(uint64_t values, in.Get<uint64_t>("the value count"));
  for (uint64_t i = 0; i < values; ++i) {
    HERD_ASSIGN_OR_RETURN(std::string key, in.GetString("a value's key", false));
    HERD_ASSIGN_OR_RETURN(state.values[key], in.GetString("a value", true));
  }
  if (!in.done()) {
    return absl::DataLossError(absl::StrFormat("handed-over state: %d bytes follow its end",
                                               bytes.size() - sizeof kMagic - in.at()));
  }
  return state;
}

absl::StatusOr<std::vector<bool>> ExchangeJoining(transport::Communicator& comm, bool joining,
                                                  Deadline deadline) {
  const int n = comm.size();
  const int me = comm.rank();
  const uint8_t mine = joining ? 1 : 0;
  std::vector<uint8_t> theirs(static_cast<size_t>(n), 0);
  std::vector<transport::Request> reqs;
  const Tag tag = Tag::Make(OpKind::kStateHandover, kFlagsId, 0);
  for (int m = 0; m < n; ++m) {
    if (m == me) continue;
    reqs.push_back(comm.irecv(m, tag, AsMutableBytes(&theirs[static_cast<size_t>(m)], 1)));
    reqs.push_back(comm.isend(m, tag, AsBytes(&mine, 1)));
  }
  HERD_RETURN_IF_ERROR(comm.WaitAll(absl::MakeSpan(reqs), deadline));
  std::vector<bool> out(static_cast<size_t>(n));
  for (int m = 0; m < n; ++m) out[static_cast<size_t>(m)] = m == me ? joining : theirs[m] != 0;
  return out;
}

int HandoverSource(const std::vector<bool>& joining, int member) {
  const int n = static_cast<int>(joining.size());
  for (int step = 1; step < n; ++step) {
    const int m = ((member - step) % n + n) % n;
    if (!joining[static_cast<size_t>(m)]) return m;
  }
  return -1;
}

absl::Status SendState(transport::Communicator& comm, int to, std::string_view bytes,
                       Deadline deadline) {
  const uint64_t size = bytes.size();
  std::vector<transport::Request> reqs;
  reqs.push_back(
      comm.isend(to, Tag::Make(OpKind::kStateHandover, kStateId, 0), AsBytes(&size, sizeof size)));
  uint32_t step = 1;
  for (size_t at = 0; at < bytes.size(); at += kChunkBytes, ++step) {
    const size_t n = std::min(kChunkBytes, bytes.size() - at);
    reqs.push_back(comm.isend(to, Tag::Make(OpKind::kStateHandover, kStateId, step),
                              AsBytes(bytes.data() + at, n)));
  }
  return comm.WaitAll(absl::MakeSpan(reqs), deadline);
}

absl::StatusOr<std::string> ReceiveState(transport::Communicator& comm, int from, int64_t max_bytes,
                                         Deadline deadline) {
  uint64_t size = 0;
  transport::Request head = comm.irecv(from, Tag::Make(OpKind::kStateHandover, kStateId, 0),
                                       AsMutableBytes(&size, sizeof size));
  HERD_RETURN_IF_ERROR(comm.WaitAll({&head}, deadline));
  if (size > static_cast<uint64_t>(max_bytes)) {
    const absl::Status st = absl::ResourceExhaustedError(absl::StrFormat(
        "member %d announces %d bytes of state, more than the %d this model can hold", from, size,
        max_bytes));
    (void)comm.abort(st);  // the chunks that follow are not received
    return st;
  }
  std::string bytes(size, '\0');
  std::vector<transport::Request> reqs;
  uint32_t step = 1;
  for (size_t at = 0; at < bytes.size(); at += kChunkBytes, ++step) {
    const size_t n = std::min(kChunkBytes, bytes.size() - at);
    reqs.push_back(comm.irecv(from, Tag::Make(OpKind::kStateHandover, kStateId, step),
                              AsMutableBytes(bytes.data() + at, n)));
  }
  HERD_RETURN_IF_ERROR(comm.WaitAll(absl::MakeSpan(reqs), deadline));
  return bytes;
}

absl::Status ConfirmReceived(transport::Communicator& comm, int peer, bool receiver,
                             Deadline deadline) {
  uint8_t byte = 1;
  const Tag tag = Tag::Make(OpKind::kStateHandover, kFlagsId, 1);
  transport::Request req = receiver ? comm.isend(peer, tag, AsBytes(&byte, 1))
                                    : comm.irecv(peer, tag, AsMutableBytes(&byte, 1));
  return comm.WaitAll({&req}, deadline);
}

int64_t DropOwnState(checkpoint::ProcessState& state) {
  int64_t dropped = 0;
  std::erase_if(state.extents, [&](const checkpoint::Extent& e) {
    const std::string_view kind = std::string_view(e.name).substr(0, e.name.find('/'));
    const bool own = kind == "residual" || kind == "reducer_residual" || kind == "replica";
    if (own) dropped += static_cast<int64_t>(e.bytes.size());
    return own;
  });
  return dropped;
}

}  // namespace herd::worker
