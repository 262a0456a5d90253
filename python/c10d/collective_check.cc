#include "python/c10d/collective_check.h"

#include <algorithm>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace herd::python::c10d_backend {
namespace {

constexpr char kSeparator = '\x1f';
constexpr size_t kMaxDescriptor = 4096;  // bytes on the wire; longer fields are cut

std::string Cut(const std::string& s, size_t n) {
  return s.size() <= n ? s : s.substr(0, n > 3 ? n - 3 : n) + "...";
}

std::string Last(const std::vector<CallDescriptor>& last, int rank) {
  const CallDescriptor& d = last[rank];
  if (d.op.empty()) return "it made no collective call in this group before";
  return absl::StrFormat("its last collective was #%d %s", d.seq, d.Describe());
}

}  // namespace

std::string CallDescriptor::Describe() const {
  std::string s = op;
  if (!signature.empty()) s += " on " + signature;
  if (!rank_specific.empty()) s += " (" + rank_specific + ")";
  return s;
}

std::string CallDescriptor::Encode() const {
  std::string s = absl::StrFormat("%d", seq);
  s += kSeparator;
  s += Cut(op, 256);
  s += kSeparator;
  s += Cut(signature, 2048);
  s += kSeparator;
  s += Cut(rank_specific, 1024);
  return s;
}

bool CallDescriptor::Decode(const std::string& bytes, CallDescriptor& out) {
  std::vector<std::string> parts = absl::StrSplit(bytes, kSeparator);
  if (parts.size() != 4 || !absl::SimpleAtoi(parts[0], &out.seq)) return false;
  out.op = parts[1];
  out.signature = parts[2];
  out.rank_specific = parts[3];
  return true;
}

transport::Tag UserTag(UserStep step, uint64_t id) {
  return transport::Tag::Make(transport::OpKind::kUser,
                              static_cast<uint32_t>(id & transport::Tag::kMaxId),
                              static_cast<uint32_t>(step));
}

absl::Status ExchangeDescriptors(transport::Communicator& comm, const CallDescriptor& mine,
                                 std::vector<CallDescriptor>& last, Deadline deadline,
                                 const std::string& group) {
  const int p = comm.size(), me = comm.rank();
  last.resize(p);
  last[me] = mine;
  if (p == 1) return absl::OkStatus();
  const std::string wire = mine.Encode();
  const transport::Tag tag = UserTag(UserStep::kDescriptor, mine.seq);
  std::vector<std::string> inbox(p, std::string(kMaxDescriptor, '\0'));
  std::vector<transport::Request> recvs(p), sends(p);
  for (int r = 0; r < p; ++r) {
    if (r == me) continue;
    recvs[r] = comm.irecv(r, tag, AsMutableBytes(inbox[r].data(), inbox[r].size()));
  }
  for (int r = 0; r < p; ++r) {
    if (r == me) continue;
    sends[r] = comm.isend(r, tag, AsBytes(wire.data(), wire.size()));
  }
  // Every receive is waited for (by the one deadline), so a missing rank is told apart from a
  // dead one and every rank that did not call is listed.
  std::vector<int> missing;
  absl::Status failed;
  for (int r = 0; r < p; ++r) {
    if (r == me) continue;
    absl::Status st = comm.wait(recvs[r], deadline);
    if (st.ok()) {
      CallDescriptor theirs;
      if (!CallDescriptor::Decode(inbox[r].substr(0, recvs[r].received()), theirs) ||
          theirs.seq != mine.seq) {
        failed = absl::DataLossError(absl::StrFormat(
            "rank %d sent an unreadable call descriptor for collective #%d", r, mine.seq));
        continue;
      }
      last[r] = std::move(theirs);
    } else if (absl::IsDeadlineExceeded(st)) {
      missing.push_back(r);
    } else if (failed.ok()) {
      failed = st;
    }
  }
  if (!missing.empty() || !failed.ok()) {
    std::vector<std::string> who;
    for (int r : missing) {
      who.push_back(absl::StrFormat("rank %d did not call it (%s)", r, Last(last, r)));
    }
    std::string what =
        absl::StrFormat("%s: collective #%d %s on rank %d", group, mine.seq, mine.Describe(), me);
    absl::Status st;
    if (!failed.ok()) {
      st = absl::Status(failed.code(),
                        absl::StrFormat("%s: %s%s%s", what, failed.message(),
                                        who.empty() ? "" : "; ", absl::StrJoin(who, "; ")));
    } else {
      st = absl::DeadlineExceededError(absl::StrFormat(
          "%s: Timed out waiting for the other ranks: %s. Every rank must call the group's "
          "collectives in the same order",
          what, absl::StrJoin(who, "; ")));
    }
    (void)comm.abort(st);  // no buffer of this exchange is touched after this
    return st;
  }
  for (int r = 0; r < p; ++r) {
    if (r == me) continue;
    if (absl::Status st = comm.wait(sends[r], deadline); !st.ok()) {
      (void)comm.abort(st);
      return st;
    }
  }
  bool agree = true;
  for (int r = 0; r < p; ++r) {
    agree &= last[r].op == mine.op && last[r].signature == mine.signature;
  }
  if (agree) return absl::OkStatus();
  std::vector<std::string> calls;
  for (int r = 0; r < p; ++r) {
    calls.push_back(absl::StrFormat("rank %d called %s", r, last[r].Describe()));
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "%s: the ranks called different collectives as call #%d: %s. Every rank must call the "
      "group's collectives in the same order, on tensors of the same shapes and dtypes",
      group, mine.seq, absl::StrJoin(calls, "; ")));
}

}  // namespace herd::python::c10d_backend
