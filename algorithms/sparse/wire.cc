#include "algorithms/sparse/wire.h"

#include <string>

#include "absl/strings/str_format.h"

namespace herd::sparse {

using transport::Request;
using transport::Tag;

Tag Wire::TagOf(Phase phase, uint32_t step) const {
  return Tag::Make(transport::OpKind::kSparse, id_,
                   (static_cast<uint32_t>(phase) << kPhaseShift) | (step & kMaxPhaseStep));
}

Request Wire::Send(int peer, Phase phase, uint32_t step, ConstBytes bytes) {
  return comm_.isend(peer, TagOf(phase, step), bytes);
}

Request Wire::Recv(int peer, Phase phase, uint32_t step, MutableBytes bytes) {
  return comm_.irecv(peer, TagOf(phase, step), bytes);
}

absl::StatusOr<size_t> Wire::WaitRecv(Request& req) {
  absl::Status s = comm_.wait(req, deadline_);
  if (!s.ok()) return Fail(std::move(s));
  return req.received();
}

absl::Status Wire::WaitSend(Request& req) {
  absl::Status s = comm_.wait(req, deadline_);
  if (!s.ok()) return Fail(std::move(s));
  return absl::OkStatus();
}

absl::Status Wire::WaitSends(absl::Span<Request> reqs) {
  for (Request& r : reqs) {
    absl::Status s = WaitSend(r);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Wire::BadFrame(int peer, Phase phase, uint32_t step, const absl::Status& why) {
  return Fail(absl::InvalidArgumentError(absl::StrFormat(
      "%s: rank %d sent a bad frame (%s): %s; every rank must pass the same count, density and "
      "teams",
      what_, peer, TagOf(phase, step).ToString(), std::string(why.message()))));
}

absl::Status Wire::Fail(absl::Status error) {
  // abort() only reports a failure to abort; the original error is the one worth returning.
  comm_.abort(error).IgnoreError();
  return error;
}

}  // namespace herd::sparse
