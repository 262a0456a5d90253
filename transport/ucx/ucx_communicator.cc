// The data path of the UCX backend: posting tag operations, progressing the worker, peer
// failures, abort and shutdown. See ucx_communicator_impl.h for the locking and progress model.

#include <poll.h>

#include <algorithm>
#include <thread>

#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "transport/ucx/ucx_communicator_impl.h"

namespace herd::transport::ucx {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kFullMask = ~uint64_t{0};
// Keep spinning on the worker this long after it last made progress before sleeping on its
// event fd: long enough to catch the reply of a short round trip, short enough not to steal a
// shared core from the ranks that have work. Each empty spin yields the core: with more ranks
// than cores the peer this rank waits for often needs exactly this core to send. (4 ranks on 2
// cores, 4 KiB ring all-reduce: 305 us with a plain spin, 62 us yielding.)
constexpr auto kSpinWindow = 50us;
// Upper bound of one sleep on the event fd, so that UCX's timers (keepalive) still run and a
// transport without wakeup support only costs latency, never a hang.
constexpr auto kMaxSleep = 100ms;
// A send can wait for room in the receiver's shared-memory FIFO, and UCX announces no event
// when room appears: while sends are in flight, sleep in naps starting at this length
// (doubling up to kMaxBackoff while nothing progresses) instead of until the next event. The
// 16 MiB FIFO (ucx_worker.cc) takes milliseconds to drain, so the naps keep it from running dry.
constexpr auto kSendNapMin = std::chrono::microseconds(25);
// Empty wake-ups in a row after which wait() stops trusting the event fd, and the longest
// plain sleep it then takes between progress calls.
constexpr int kIdleWakesBeforeBackoff = 8;
constexpr auto kMaxBackoff = std::chrono::microseconds(1000);
// How long abort() lets matched transfers with live peers finish before closing endpoints.
constexpr auto kAbortDrain = 500ms;
// Bound on closing endpoints, in abort() and in the destructor.
constexpr auto kCloseTimeout = 2s;
// Progress calls that deliver what a dead peer had already queued here before failing it.
constexpr int kDrainRounds = 10000;

// The sender's rank goes in the top 16 bits of the UCP tag (see transport/tag.h).
uint64_t WireTag(int sender, Tag tag) {
  return (static_cast<uint64_t>(sender) << Tag::kBits) | tag.packed();
}

void SendDone(void* request, ucs_status_t s, void* user) {
  auto* r = static_cast<UcxRequest*>(user);
  r->comm->OnUcxComplete(r, request, s, r->bytes, 0);
}

void RecvDone(void* request, ucs_status_t s, const ucp_tag_recv_info_t* info, void* user) {
  auto* r = static_cast<UcxRequest*>(user);
  r->comm->OnUcxComplete(r, request, s, info != nullptr ? info->length : 0,
                         info != nullptr ? info->sender_tag : 0);
}

}  // namespace

ucs_status_ptr_t PostTagRecv(ucp_worker_h worker, void* buf, size_t length, uint64_t tag,
                             uint64_t mask, UcxRequest& r) {
  ucp_request_param_t param{};
  // Never complete inline: UCX 1.13 then leaves recv_info (length, sender) unfilled.
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                       UCP_OP_ATTR_FIELD_RECV_INFO | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.cb.recv = RecvDone;
  param.user_data = &r;
  param.recv_info.tag_info = &r.recv_info;
  return ucp_tag_recv_nbx(worker, buf, length, tag, mask, &param);
}

bool SleepOnFd(int fd, Deadline d) {
  auto left = std::min<std::chrono::nanoseconds>(d.remaining(), kMaxSleep);
  timespec ts{static_cast<time_t>(left.count() / 1000000000),
              static_cast<long>(left.count() % 1000000000)};
  pollfd pfd{fd, POLLIN, 0};
  return ::ppoll(&pfd, 1, &ts, nullptr) > 0;
}

Request UcxCommunicator::isend(int peer, Tag tag, ConstBytes buf) {
  auto r = std::make_shared<UcxRequest>(this, Direction::kSend, peer, tag, buf.size());
  EnsureConnected(peer);
  std::lock_guard<std::mutex> wl(worker_mu_);
  if (Refused(*r)) return Request(std::move(r));
  if (peers_[peer].data == nullptr) {  // EnsureConnected leaves none only for a refused peer
    std::lock_guard<std::mutex> lock(mu_);
    FinishLocked(*r, absl::InternalError(absl::StrFormat("%s: rank %d has no endpoint to it",
                                                         r->Describe(), rank_)));
    return Request(std::move(r));
  }
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = SendDone;
  param.user_data = r.get();
  ucs_status_ptr_t h =
      ucp_tag_send_nbx(peers_[peer].data, buf.data(), buf.size(), WireTag(rank_, tag), &param);
  Posted(r, h);
  return Request(std::move(r));
}

Request UcxCommunicator::irecv(int peer, Tag tag, MutableBytes buf) {
  auto r = std::make_shared<UcxRequest>(this, Direction::kRecv, peer, tag, buf.size());
  // A receive needs no endpoint (UCP matches tags per worker), but connecting the peer now
  // watches it while this rank waits for it, and its send needs this end's endpoints to pair.
  EnsureConnected(peer);
  std::lock_guard<std::mutex> wl(worker_mu_);
  if (Refused(*r)) return Request(std::move(r));
  ucs_status_ptr_t h =
      PostTagRecv(worker_->worker(), buf.data(), buf.size(), WireTag(peer, tag), kFullMask, *r);
  Posted(r, h);
  return Request(std::move(r));
}

bool UcxCommunicator::Refused(UcxRequest& r) {
  std::lock_guard<std::mutex> lock(mu_);
  if (r.peer < 0 || r.peer >= size_) {
    FinishLocked(r, absl::InvalidArgumentError(absl::StrFormat(
                        "%s: peer rank %d is out of range [0, %d)", r.Describe(), r.peer, size_)));
  } else if (!aborted_.ok()) {
    FinishLocked(r, aborted_);
  } else if (!dead_[r.peer].ok()) {
    FinishLocked(r, DeadPeerError(r));
  }
  return r.done.load(std::memory_order_relaxed);
}

void UcxCommunicator::Posted(const std::shared_ptr<UcxRequest>& r, ucs_status_ptr_t handle) {
  std::lock_guard<std::mutex> lock(mu_);
  if (UCS_PTR_IS_PTR(handle) && r->callback_ran) return;  // completed (and released) inline
  if (UCS_PTR_IS_PTR(handle)) {
    r->ucp_request = handle;
    inflight_.emplace(r.get(), r);
    if (r->direction == Direction::kSend) sends_in_flight_.fetch_add(1, std::memory_order_release);
    posts_.fetch_add(1, std::memory_order_release);
    // A thread may be asleep on the event fd with the progress token; this operation may need
    // progress that no event will announce (e.g. a send queued behind a full FIFO).
    if (progressing_) ucp_worker_signal(worker_->worker());
    return;
  }
  // Completed at once (or failed to start): UCX calls no callback.
  ucs_status_t s = UCS_PTR_STATUS(handle);
  size_t length = r->direction == Direction::kSend ? r->bytes : r->recv_info.length;
  FinishLocked(*r, StatusFromUcx(*r, s, length), length);
}

void UcxCommunicator::OnUcxComplete(UcxRequest* r, void* ucp_request, ucs_status_t s, size_t length,
                                    uint64_t sender_tag) {
  r->callback_ran = true;
  r->ucp_request = nullptr;
  ucp_request_free(ucp_request);
  std::shared_ptr<UcxRequest> keep;  // released after mu_: it may hold the last reference
  if (r->notice) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = inflight_.find(r);
      if (it != inflight_.end()) {
        keep = std::move(it->second);
        inflight_.erase(it);
      }
    }
    if (s == UCS_OK) OnNotice(sender_tag, length);
    // Posted again after this progress call, not from inside UCX's callback.
    if (!shutting_down_ && s != UCS_ERR_CANCELED) repost_notice_ = true;
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = inflight_.find(r);
  if (it != inflight_.end()) {
    keep = std::move(it->second);
    inflight_.erase(it);
    if (r->direction == Direction::kSend) sends_in_flight_.fetch_sub(1, std::memory_order_release);
  }
  // A request failed earlier (dead peer, abort) keeps that status.
  if (!r->done.load(std::memory_order_relaxed))
    FinishLocked(*r, StatusFromUcx(*r, s, length), length);
}

void UcxCommunicator::FinishLocked(UcxRequest& r, absl::Status s, size_t received) {
  r.status = std::move(s);
  r.received = r.status.ok() ? received : 0;
  r.done.store(true, std::memory_order_release);
  cv_.notify_all();
}

absl::Status UcxCommunicator::StatusFromUcx(const UcxRequest& r, ucs_status_t s, size_t length) {
  switch (s) {
    case UCS_OK:
      return absl::OkStatus();
    case UCS_ERR_MESSAGE_TRUNCATED:
      return absl::OutOfRangeError(
          absl::StrFormat("%s: the message is longer than the %d-byte receive buffer (UCX: %s)",
                          r.Describe(), r.bytes, ucs_status_string(s)));
    case UCS_ERR_CANCELED:
      if (!aborted_.ok()) return aborted_;
      if (!dead_[r.peer].ok()) return DeadPeerError(r);
      return absl::CancelledError(absl::StrFormat("%s: cancelled by UCX", r.Describe()));
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_REJECTED:
    case UCS_ERR_IO_ERROR:
    case UCS_ERR_TIMED_OUT:
    // A shared-memory send to a process that just died: its segment is gone (seen 1 in 30
    // runs of UcxProcessTest.KilledRankIsNamedByEverySurvivorWithinSeconds).
    case UCS_ERR_SHMEM_SEGMENT:
      return absl::UnavailableError(
          WithDeadPeersNote(absl::StrFormat("%s: rank %d is unreachable (UCX: %s)", r.Describe(),
                                            r.peer, ucs_status_string(s)),
                            r.peer));
    default:
      // Whatever UCX reports on a transfer with a peer already known dead is that death.
      if (!dead_[r.peer].ok()) return DeadPeerError(r);
      return absl::InternalError(
          absl::StrFormat("%s failed: UCX %s", r.Describe(), ucs_status_string(s)));
  }
}

std::string UcxCommunicator::WithDeadPeersNote(std::string text, int except) const {
  int listed = 0;
  for (int p : death_order_) {
    // A reason already told (forwarded abort reasons nest) is not repeated.
    const std::string reason(dead_[p].message());
    if (p == except || text.find(reason) != std::string::npos) continue;
    if (++listed > 4) {
      text += "; and more";
      break;
    }
    text += absl::StrFormat("; note: %s", reason);
  }
  return text;
}

absl::Status UcxCommunicator::DeadPeerError(const UcxRequest& r) {
  return absl::UnavailableError(
      WithDeadPeersNote(absl::StrFormat("%s: %s", r.Describe(), dead_[r.peer].message()), r.peer));
}

absl::Status UcxCommunicator::DeadlineError(const UcxRequest& r) {
  return absl::DeadlineExceededError(WithDeadPeersNote(
      absl::StrFormat("deadline exceeded waiting for %s on rank %d", r.Describe(), rank_)));
}

absl::Status UcxCommunicator::wait(Request& req, Deadline deadline) {
  if (req.empty()) return absl::OkStatus();
  auto* r = dynamic_cast<UcxRequest*>(req.state());
  if (r == nullptr || r->comm != this) {
    return absl::InvalidArgumentError(
        absl::StrFormat("wait on rank %d's UCX communicator for a request it did not issue (%s)",
                        rank_, req.state()->Describe()));
  }
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (r->done.load(std::memory_order_acquire)) {
      absl::Status s = r->status;
      req.set_received(r->received);
      if (s.ok()) req.reset();
      return s;
    }
    if (deadline.expired()) return DeadlineError(*r);
    if (!progressing_) {
      progressing_ = true;
      lock.unlock();
      ProgressUntil(*r, deadline);
      lock.lock();
      progressing_ = false;
      cv_.notify_all();  // hand the token to another waiter
    } else {
      // Bounded pieces: Deadline::Infinite() is not a time a condition variable can wait for.
      cv_.wait_until(lock, std::min(deadline.at(), Clock::now() + kMaxSleep));
    }
  }
}

void UcxCommunicator::ProgressUntil(const UcxRequest& r, Deadline deadline) {
  ucp_worker_h w = worker_->worker();
  auto last_busy = Clock::now();
  // Wake-ups by the event fd after which the worker had nothing to do. UCX can leave the fd
  // readable (a TCP socket it watches for writability while a handshake waits on a peer that
  // does not progress); then sleeping on it would spin, so back off with plain sleeps instead.
  int idle_wakes = 0;
  bool woke = false;
  // Naps between progress calls while sends are in flight (see kSendNapMin).
  auto nap = kSendNapMin;
  while (!r.done.load(std::memory_order_acquire) && !deadline.expired()) {
    const uint64_t posts_seen = posts_.load(std::memory_order_acquire);
    unsigned progressed;
    {
      std::lock_guard<std::mutex> wl(worker_mu_);
      if (shut_down_) return;
      progressed = ProgressOnce();
    }
    if (woke) idle_wakes = progressed > 0 ? 0 : idle_wakes + 1;
    woke = false;
    if (progressed > 0) {
      last_busy = Clock::now();
      nap = kSendNapMin;
      continue;
    }
    if (options_.busy_poll) continue;
    if (idle_wakes < kIdleWakesBeforeBackoff && Clock::now() - last_busy < kSpinWindow) {
      std::this_thread::yield();
      continue;
    }

    ucs_status_t s;
    {
      std::lock_guard<std::mutex> wl(worker_mu_);
      if (shut_down_) return;
      s = ucp_worker_arm(w);
    }
    if (s == UCS_ERR_BUSY) continue;  // events arrived meanwhile: progress them first
    if (r.done.load(std::memory_order_acquire) ||
        posts_.load(std::memory_order_acquire) != posts_seen) {
      continue;  // new work was posted after our last progress call
    }
    if (s == UCS_OK && idle_wakes < kIdleWakesBeforeBackoff) {
      Deadline until = deadline;
      if (sends_in_flight_.load(std::memory_order_acquire) > 0) {
        until = Deadline(std::min(deadline.at(), Clock::now() + nap));
        nap = std::min<std::chrono::microseconds>(nap * 2, kMaxBackoff);
      }
      // A wake-up by another thread's isend/irecv (ucp_worker_signal) is not an empty one.
      woke = SleepOnFd(worker_->event_fd(), until) &&
             posts_.load(std::memory_order_acquire) == posts_seen;
    } else {
      // No wakeup support, or a storm of empty wake-ups: sleep without the fd, longer each
      // time up to kMaxBackoff (the latency this mode costs).
      int doublings = std::min(std::max(idle_wakes - kIdleWakesBeforeBackoff, 0), 5);
      auto pause = std::min<std::chrono::microseconds>(kMaxBackoff,
                                                       std::chrono::microseconds(32 << doublings));
      std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(pause, deadline.remaining()));
      woke = idle_wakes > 0;  // still in back-off: leave it only when progress is made
    }
    last_busy = Clock::now();
  }
}

unsigned UcxCommunicator::ProgressOnce() {
  unsigned n = ucp_worker_progress(worker_->worker());
  if (repost_notice_) {
    repost_notice_ = false;
    PostNoticeReceive();
  }
  if (deaths_pending_.load(std::memory_order_acquire)) HandleDeadPeers();
  return n;
}

void UcxCommunicator::OnPeerFailed(int peer, ucs_status_t s) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!dead_[peer].ok()) return;
  dead_by_watch_[peer] = true;
  dead_[peer] = absl::UnavailableError(
      absl::StrFormat("rank %d is unreachable: its process died or closed its communicator "
                      "(UCX: %s on the endpoint watching it)",
                      peer, ucs_status_string(s)));
  death_order_.push_back(peer);
  Log().debug("ucx rank {}: peer rank {} failed: {}", rank_, peer, ucs_status_string(s));
  deaths_pending_.store(true, std::memory_order_release);
}

void UcxCommunicator::HandleDeadPeers() {
  deaths_pending_.store(false, std::memory_order_release);
  ucp_worker_h w = worker_->worker();
  // What a peer sent before it died may still sit in this worker's queues (eager messages in a
  // shared-memory FIFO): deliver it before failing that peer's receives.
  for (int i = 0; i < kDrainRounds && ucp_worker_progress(w) > 0; ++i) {
  }
  std::vector<std::shared_ptr<UcxRequest>> to_cancel;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [ptr, r] : inflight_) {
      if (r->done.load(std::memory_order_relaxed) || dead_[r->peer].ok()) continue;
      FinishLocked(*r, DeadPeerError(*r));
      if (r->direction == Direction::kRecv) to_cancel.push_back(r);
    }
  }
  // A receive not matched yet completes as cancelled (its callback runs inside the call); a
  // matched one stays with UCX until the shutdown, but nothing more arrives from a dead peer.
  for (auto& r : to_cancel) {
    if (r->ucp_request != nullptr) ucp_request_cancel(w, r->ucp_request);
  }
}

absl::Status UcxCommunicator::abort(absl::Status why) {
  if (why.ok())
    why = absl::CancelledError(absl::StrFormat("rank %d's communicator aborted", rank_));
  std::lock_guard<std::mutex> wl(worker_mu_);
  Shutdown(why, /*graceful=*/false);
  return absl::OkStatus();
}

absl::Status UcxCommunicator::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return aborted_;
}

void UcxCommunicator::Shutdown(const absl::Status& why, bool graceful) {
  if (shutting_down_) return;
  shutting_down_ = true;
  ucp_worker_h w = worker_->worker();
  std::vector<std::shared_ptr<UcxRequest>> pending;
  absl::Status reason;  // the first abort's status, which sticks
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_.ok()) aborted_ = why;
    reason = aborted_;
    for (auto& [ptr, r] : inflight_) {
      pending.push_back(r);
      if (!r->done.load(std::memory_order_relaxed)) FinishLocked(*r, aborted_);
    }
  }
  // 1. Receives not matched yet are cancelled; their callbacks run inside ucp_request_cancel.
  //    An abort keeps the notice receive until its own notices are out (step 3).
  auto cancel_receives = [&](bool notices) {
    for (auto& r : pending) {
      if (r->direction == Direction::kRecv && r->ucp_request != nullptr && r->notice == notices) {
        ucp_request_cancel(w, r->ucp_request);
      }
    }
  };
  cancel_receives(false);
  if (graceful) cancel_receives(true);
  // 2. Transfers already matched cannot be cancelled in UCX 1.13: let those with live peers
  //    finish (bounded), so that no data lands in a user buffer after we return.
  const auto drain_until = Clock::now() + kAbortDrain;
  while (Clock::now() < drain_until) {
    bool busy = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& r : pending) {
        busy |= !r->notice && r->ucp_request != nullptr && dead_[r->peer].ok();
      }
    }
    if (!busy) break;
    if (ProgressOnce() == 0 && ucp_worker_arm(w) == UCS_OK) {
      SleepOnFd(worker_->event_fd(), Deadline::After(1ms));
    }
  }
  // 3. An abort tells the live peers why and lets them read it (bounded: ucx_abort_notice.cc),
  //    then every endpoint is closed (forcibly unless graceful): sends still queued are dropped.
  if (!graceful) {
    SendAbortNotices(reason);
    cancel_receives(true);
  }
  CloseEndpoints(graceful);
  // 4. What UCX still holds is released without callbacks; the worker is never progressed
  //    again, so nothing more is copied into or out of user buffers.
  int abandoned = 0;
  for (auto& r : pending) {
    if (r->ucp_request != nullptr) {
      ucp_request_free(r->ucp_request);
      r->ucp_request = nullptr;
      ++abandoned;
    }
  }
  if (abandoned > 0) {
    Log().debug("ucx rank {}: {} transfers with dead or silent peers abandoned at shutdown", rank_,
                abandoned);
  } else if (graceful) {
    bool any_dead;
    {
      std::lock_guard<std::mutex> lock(mu_);
      any_dead = !death_order_.empty();
    }
    // Only when no user buffer is still matched inside UCX (this progresses the worker), and
    // no peer died (its last message may never be complete).
    if (!any_dead) DiscardUnexpected();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    inflight_.clear();
    sends_in_flight_.store(0, std::memory_order_release);
  }
  shut_down_ = true;
  ucp_worker_signal(w);  // wake a progressor asleep on the event fd
}

void UcxCommunicator::DiscardUnexpected() {
  ucp_worker_h w = worker_->worker();
  const auto until = Clock::now() + kCloseTimeout;
  std::vector<char> scratch;
  int discarded = 0;
  while (Clock::now() < until) {
    ucp_tag_recv_info_t info{};
    ucp_tag_message_h msg = ucp_tag_probe_nb(w, 0, 0, /*remove=*/1, &info);
    if (msg == nullptr) {
      if (ucp_worker_progress(w) == 0) break;
      continue;
    }
    scratch.resize(std::max<size_t>(info.length, 1));
    ucp_request_param_t param{};
    ucs_status_ptr_t h = ucp_tag_msg_recv_nbx(w, scratch.data(), info.length, msg, &param);
    while (UCS_PTR_IS_PTR(h) && ucp_request_check_status(h) == UCS_INPROGRESS &&
           Clock::now() < until) {
      ucp_worker_progress(w);
    }
    if (UCS_PTR_IS_PTR(h)) ucp_request_free(h);
    ++discarded;
  }
  if (discarded > 0) {
    Log().debug("ucx rank {}: discarded {} messages nobody received", rank_, discarded);
  }
}

void UcxCommunicator::CloseEndpoints(bool graceful) {
  ucp_worker_h w = worker_->worker();
  const auto until = Clock::now() + kCloseTimeout;
  // Waits (bounded by `until`) for UCX requests such as flushes and closes to complete.
  auto await = [&](std::vector<void*>& requests) {
    while (!requests.empty() && Clock::now() < until) {
      unsigned n = ProgressOnce();
      for (auto it = requests.begin(); it != requests.end();) {
        if (ucp_request_check_status(*it) != UCS_INPROGRESS) {
          ucp_request_free(*it);
          it = requests.erase(it);
        } else {
          ++it;
        }
      }
      if (n == 0 && !requests.empty() && ucp_worker_arm(w) == UCS_OK) {
        SleepOnFd(worker_->event_fd(), Deadline::After(1ms));
      }
    }
    for (void* h : requests) ucp_request_free(h);  // UCX releases them when they complete
    requests.clear();
  };

  std::vector<bool> alive(peers_.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t p = 0; p < peers_.size(); ++p) alive[p] = dead_[p].ok();
  }
  // A graceful close first flushes what was sent to live peers: a send completes once UCX has
  // buffered it, and over TCP the bytes may still sit in UCX's queues. The flush completes
  // locally; unlike a flushing close it needs nothing from the peer, which may be busy.
  std::vector<void*> pending;
  if (graceful) {
    for (size_t p = 0; p < peers_.size(); ++p) {
      if (!alive[p] || peers_[p].data == nullptr) continue;
      ucp_request_param_t param{};
      ucs_status_ptr_t h = ucp_ep_flush_nbx(peers_[p].data, &param);
      if (UCS_PTR_IS_PTR(h)) pending.push_back(h);
    }
    await(pending);
  }
  // Then every endpoint is closed by force: no handshake with peers that may be gone or busy.
  for (UcxPeer& peer : peers_) {
    std::vector<ucp_ep_h> eps;  // the watch endpoint may also be the data endpoint
    if (peer.watch != nullptr) eps.push_back(peer.watch);
    if (peer.data != nullptr && peer.data != peer.watch) eps.push_back(peer.data);
    peer.watch = peer.data = nullptr;
    for (ucp_ep_h ep : eps) {
      ucp_request_param_t param{};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = UCP_EP_CLOSE_FLAG_FORCE;
      ucs_status_ptr_t h = ucp_ep_close_nbx(ep, &param);
      if (UCS_PTR_IS_PTR(h)) pending.push_back(h);
    }
  }
  const size_t closing = pending.size();
  await(pending);
  if (Clock::now() >= until) {
    Log().debug("ucx rank {}: closing {} endpoints took longer than {} ms", rank_, closing,
                std::chrono::duration_cast<std::chrono::milliseconds>(kCloseTimeout).count());
  }
}

UcxCommunicator::UcxCommunicator(int rank, int size, std::unique_ptr<UcxWorker> worker,
                                 const UcxOptions& options, std::shared_ptr<Store> store,
                                 std::string my_host)
    : rank_(rank),
      size_(size),
      options_(options),
      worker_(std::move(worker)),
      store_(std::move(store)),
      my_host_(std::move(my_host)),
      peers_(size),
      watch_args_(size),
      connected_(new std::atomic<bool>[size]) {
  for (int p = 0; p < size; ++p) connected_[p].store(false, std::memory_order_relaxed);
  dead_.assign(size, absl::OkStatus());
  dead_by_watch_.assign(size, false);
}

UcxCommunicator::~UcxCommunicator() {
  {
    std::lock_guard<std::mutex> wl(worker_mu_);
    Shutdown(absl::CancelledError(absl::StrFormat("rank %d's communicator was destroyed", rank_)),
             /*graceful=*/true);
  }
  // Destroy the worker before the members its callbacks use.
  worker_.reset();
}

}  // namespace herd::transport::ucx
