// Abort notices: how a rank that gives up tells its peers why (see ucx_communicator_impl.h).
// Without them a peer two hops away from a crash only learns that its neighbour went away, and
// its error names the neighbour instead of the rank that failed.

#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "transport/ucx/ucx_communicator_impl.h"

namespace herd::transport::ucx {
namespace {

using namespace std::chrono_literals;

// How long an abort waits for its notices to leave and for the peers told to close their side,
// before it closes its own endpoints.
constexpr auto kNoticeTimeout = 200ms;

uint64_t NoticeTag(int sender) {
  return (uint64_t{UcxCommunicator::kNoticeRank} << Tag::kBits) | static_cast<uint64_t>(sender);
}
constexpr uint64_t kNoticeMask = uint64_t{0xFFFF} << Tag::kBits;

}  // namespace

void UcxCommunicator::PostNoticeReceive() {
  ucp_worker_h w = worker_->worker();
  // PostTagRecv never completes inline; the loop only matters for a UCX that ignores the flag.
  while (!shutting_down_) {
    auto r = std::make_shared<UcxRequest>(this, Direction::kRecv, rank_, Tag{}, kNoticeBytes);
    r->notice = true;
    ucs_status_ptr_t h =
        PostTagRecv(w, notice_buffer_.data(), notice_buffer_.size(), NoticeTag(0), kNoticeMask, *r);
    if (UCS_PTR_IS_PTR(h)) {
      if (r->callback_ran) return;  // completed inline; the callback asked for a new post
      r->ucp_request = h;
      std::lock_guard<std::mutex> lock(mu_);
      inflight_.emplace(r.get(), r);
      return;
    }
    ucs_status_t s = UCS_PTR_STATUS(h);
    if (s == UCS_OK) {
      OnNotice(r->recv_info.sender_tag, r->recv_info.length);
    } else if (s != UCS_ERR_MESSAGE_TRUNCATED) {
      Log().debug("ucx rank {}: cannot receive abort notices: {}", rank_, ucs_status_string(s));
      return;
    }
  }
}

void UcxCommunicator::OnNotice(uint64_t sender_tag, size_t length) {
  const int64_t sender = static_cast<int64_t>(sender_tag & ~kNoticeMask);
  if (sender < 0 || sender >= size_ || sender == rank_) return;
  const int p = static_cast<int>(sender);
  std::string reason(notice_buffer_.data(), std::min(length, notice_buffer_.size()));
  std::lock_guard<std::mutex> lock(mu_);
  if (!dead_[p].ok() && !dead_by_watch_[p]) return;  // already told
  if (dead_[p].ok()) death_order_.push_back(p);
  dead_[p] =
      absl::UnavailableError(absl::StrFormat("rank %d aborted its communicator: %s", p, reason));
  dead_by_watch_[p] = false;
  Log().debug("ucx rank {}: peer rank {} aborted: {}", rank_, p, reason);
  deaths_pending_.store(true, std::memory_order_release);
}

void UcxCommunicator::SendAbortNotices(const absl::Status& why) {
  ucp_worker_h w = worker_->worker();
  notice_text_ = why.ToString();
  if (notice_text_.size() > kNoticeBytes) notice_text_.resize(kNoticeBytes);
  std::vector<void*> sends;
  std::vector<int> told;
  for (int p = 0; p < static_cast<int>(peers_.size()); ++p) {
    if (p == rank_ || peers_[p].data == nullptr) continue;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!dead_[p].ok()) continue;
    }
    ucp_request_param_t param{};
    ucs_status_ptr_t h = ucp_tag_send_nbx(peers_[p].data, notice_text_.data(), notice_text_.size(),
                                          NoticeTag(rank_), &param);
    if (UCS_PTR_IS_PTR(h)) sends.push_back(h);
    if (!UCS_PTR_IS_ERR(h)) told.push_back(p);
  }
  const auto until = Clock::now() + kNoticeTimeout;
  while (!sends.empty() && Clock::now() < until) {
    ucp_worker_progress(w);
    for (auto it = sends.begin(); it != sends.end();) {
      if (ucp_request_check_status(*it) != UCS_INPROGRESS) {
        ucp_request_free(*it);
        it = sends.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (void* h : sends) ucp_request_free(h);  // released when they complete, or at the close
  AwaitToldPeers(told, until);
}

// A notice that has left this process may still sit in a socket: a TCP endpoint closed while
// the peer's own data waits unread in it is reset, and the reset can discard the notice before
// the peer reads it (12 of 150 runs of a killed rank in a hierarchical all-reduce on a loaded
// machine: a survivor two hops away named the neighbour instead of the rank killed; 0 of 300
// since). So the endpoints stay open until every peer told has closed its side (it read the
// notice, or failed on its own) or the bound passes. Two ranks that abort together hear each
// other's notices here (the notice receive, or TakeUnexpectedNotice) and release each other at
// once.
void UcxCommunicator::AwaitToldPeers(const std::vector<int>& told, Clock::time_point until) {
  ucp_worker_h w = worker_->worker();
  auto any_open = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    return std::any_of(told.begin(), told.end(), [&](int p) { return dead_[p].ok(); });
  };
  while (any_open() && Clock::now() < until) {
    const bool heard = TakeUnexpectedNotice(until);
    if (!heard && ucp_worker_progress(w) == 0 && ucp_worker_arm(w) == UCS_OK) {
      SleepOnFd(worker_->event_fd(), Deadline(std::min(until, Clock::now() + 1ms)));
    }
  }
}

// The notice receive is not posted again once the shutdown began, so the notices of other
// ranks aborting at the same moment wait in UCX as unexpected messages: taken here, each
// marks its sender as told.
bool UcxCommunicator::TakeUnexpectedNotice(Clock::time_point until) {
  ucp_worker_h w = worker_->worker();
  ucp_tag_recv_info_t info{};
  ucp_tag_message_h msg = ucp_tag_probe_nb(w, NoticeTag(0), kNoticeMask, /*remove=*/1, &info);
  if (msg == nullptr) return false;
  // Into the communicator's own buffer, which outlives the worker: a receive still in progress
  // at the bound may complete during the close, and must not land in freed memory. Senders cut
  // their notices to its size; a longer message ends truncated and is dropped.
  ucp_request_param_t param{};
  ucs_status_ptr_t h = ucp_tag_msg_recv_nbx(
      w, notice_buffer_.data(), std::min(info.length, notice_buffer_.size()), msg, &param);
  bool complete = !UCS_PTR_IS_ERR(h);
  if (UCS_PTR_IS_PTR(h)) {
    while (ucp_request_check_status(h) == UCS_INPROGRESS && Clock::now() < until) {
      ucp_worker_progress(w);
    }
    complete = ucp_request_check_status(h) == UCS_OK;
    ucp_request_free(h);
  }
  if (complete) OnNotice(info.sender_tag, std::min(info.length, notice_buffer_.size()));
  return true;
}

}  // namespace herd::transport::ucx
