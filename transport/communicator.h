#pragma once
// The transport seam of herd. Algorithms see only this interface; backends (loopback, ucx,
// nccl) implement it in their own folders.
//
// Contract:
//  - A Communicator joins `size()` ranks; `rank()` is this one. Peers are addressed by rank.
//  - isend/irecv are non-blocking and never fail directly: a request that cannot be started
//    (peer out of range, communicator aborted, peer known dead) carries its error, and wait()
//    returns it. The buffer must stay valid until the request completes or the communicator
//    is aborted.
//  - Messages from one sender to one receiver with the same tag match in send order. A receive
//    buffer may be larger than the message (Request::received() tells the length); a message
//    larger than the receive buffer fails both ends with OUT_OF_RANGE.
//  - wait() returns OK, or an error whose message names the peer, the direction and the tag:
//      DEADLINE_EXCEEDED  nothing arrived before the deadline; the request is still in flight
//      UNAVAILABLE        the peer is known to be dead or unreachable
//      whatever abort() was given, once the communicator is aborted.
//  - abort(why) completes every pending request of this communicator with `why` and makes every
//    later operation fail with it. After it returns no backend touches a user buffer again, so
//    it is the way to give up on requests (WaitAll does this on the first error). A collective
//    that failed leaves its communicator aborted: build a new one (the next plan epoch).
//  - Thread safety: all methods may be called concurrently from several threads.

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/bytes.h"
#include "common/deadline.h"
#include "transport/tag.h"

namespace herd::transport {

enum class Direction : uint8_t { kSend, kRecv };
enum class MemoryKind : uint8_t { kHost, kCuda };

// What every backend's request records; backends derive from it.
struct RequestState {
  RequestState(Direction d, int peer, Tag tag, size_t bytes)
      : direction(d), peer(peer), tag(tag), bytes(bytes) {}
  virtual ~RequestState() = default;

  // "recv of 4096 bytes from rank 3 (allreduce id=0 step=5)"
  std::string Describe() const;

  const Direction direction;
  const int peer;
  const Tag tag;
  const size_t bytes;
};

// A handle to one isend or irecv. Movable; an empty Request (default-constructed or already
// waited for) waits as OK immediately.
class Request {
 public:
  Request() = default;
  explicit Request(std::shared_ptr<RequestState> state) : state_(std::move(state)) {}

  bool empty() const { return state_ == nullptr; }
  RequestState* state() const { return state_.get(); }
  template <typename T>
  T* state_as() const {
    return static_cast<T*>(state_.get());
  }
  // Bytes that arrived, for a completed receive.
  size_t received() const { return received_; }
  void set_received(size_t n) { received_ = n; }
  void reset() { state_.reset(); }

 private:
  std::shared_ptr<RequestState> state_;
  size_t received_ = 0;
};

// Ops a backend runs natively on its own memory (NCCL on GPU buffers). Collectives use them
// when the communicator's memory is not host memory.
class NativeCollectives;

// State that a layer above the transport keeps per communicator (the collectives keep the host
// layout and the shared-memory segment of the ranks on this host): made on first use through
// Communicator::Attachment, destroyed with the communicator, after the backend's own shutdown
// (so it must not call the communicator from its destructor).
class CommunicatorAttachment {
 public:
  virtual ~CommunicatorAttachment() = default;
};

class Communicator {
 public:
  virtual ~Communicator();

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string_view backend() const = 0;  // "loopback", "ucx", "nccl"
  virtual MemoryKind memory() const { return MemoryKind::kHost; }
  virtual NativeCollectives* native() { return nullptr; }

  virtual Request isend(int peer, Tag tag, ConstBytes buf) = 0;
  virtual Request irecv(int peer, Tag tag, MutableBytes buf) = 0;

  // Blocks until `req` completes or the deadline passes (see the contract above). On success
  // the request is emptied and received() keeps the length that arrived.
  virtual absl::Status wait(Request& req, Deadline deadline) = 0;

  virtual absl::Status abort(absl::Status why) = 0;
  // OK until abort() was called, then its status.
  virtual absl::Status status() const = 0;

  // Waits for every request; on the first error aborts the communicator with it (so no buffer
  // is touched afterwards) and returns it.
  absl::Status WaitAll(absl::Span<Request> reqs, Deadline deadline);
  absl::Status WaitAll(std::initializer_list<Request*> reqs, Deadline deadline);

  // The attachment stored under `key`, made by `make` on the first call. Callers of one key are
  // served one at a time, so a second caller waits for the first one's `make` (which may run a
  // collective on this communicator). An error from `make` is returned and nothing is stored.
  absl::StatusOr<CommunicatorAttachment*> Attachment(
      std::string_view key,
      absl::FunctionRef<absl::StatusOr<std::unique_ptr<CommunicatorAttachment>>()> make);
  // The attachment under `key` if one was made, else nullptr; never makes one.
  CommunicatorAttachment* FindAttachment(std::string_view key);

 private:
  std::mutex attachments_mu_;
  std::vector<std::pair<std::string, std::unique_ptr<CommunicatorAttachment>>> attachments_;
};

}  // namespace herd::transport
