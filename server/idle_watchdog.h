#pragma once
// Ends client streams that go silent. gRPC's synchronous server gives each call a thread, and
// a stream's Read() blocks until the client sends, cancels or its deadline passes; a client
// that opens Push/PushPull/InitKeys streams and sends nothing (and gave no deadline) would hold
// those threads for good, and a shard with a small --threads would stop answering everyone.
// The watchdog cancels a call that has waited longer than `idle` for its next message, which
// wakes the Read() and frees the thread; the client sees CANCELLED.
//
// Only the client's silence counts: the guard is armed around each Read() and disarmed while
// the shard itself works or waits on a round (those waits have their own deadlines). A
// stream's first message has a shorter deadline (first_idle(): a client writes it as it opens
// the stream), so a stream that never says anything holds its thread for seconds, not for the
// whole idle timeout.
//
// OpeningStreams bounds, per client connection (the peer address gRPC reports), the streams
// that have not sent their first message yet: a client that opens streams and says nothing, or
// opens them again as they are ended, holds only that many threads; the others are refused at
// once (RESOURCE_EXHAUSTED). A working client's streams send at once, so it never meets the
// bound.
//
// Thread-safe. One watchdog thread per shard server.

#include <grpcpp/server_context.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace herd::server {

class IdleWatchdog {
 public:
  // The most a stream's first message may take (less when `idle` is less).
  static constexpr std::chrono::milliseconds kFirstMessage{5000};

  explicit IdleWatchdog(std::chrono::milliseconds idle);
  ~IdleWatchdog();
  IdleWatchdog(const IdleWatchdog&) = delete;
  IdleWatchdog& operator=(const IdleWatchdog&) = delete;

  std::chrono::milliseconds idle() const { return idle_; }
  std::chrono::milliseconds first_idle() const { return std::min(idle_, kFirstMessage); }

  // Armed for the time of one Read(): `ctx` is cancelled if the read lasts longer than idle()
  // (first_idle() for a stream's first message).
  class ReadGuard {
   public:
    ReadGuard(IdleWatchdog* w, grpc::ServerContext* ctx, bool first = false);
    ~ReadGuard();
    // Whether the watchdog cancelled the call while this guard was armed.
    bool timed_out() const;

   private:
    IdleWatchdog* w_;
    grpc::ServerContext* ctx_;
  };

 private:
  void Loop();

  const std::chrono::milliseconds idle_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<grpc::ServerContext*, std::chrono::steady_clock::time_point> armed_;  // -> deadline
  std::map<grpc::ServerContext*, bool> fired_;
  bool stop_ = false;
  std::thread thread_;
};

// Reads the next message of a stream with the watchdog armed (`first`: its first message).
// False at the end of the stream, when the client cancelled, or when it stayed silent too long
// (then *idle_out is set).
template <typename Reader, typename Message>
bool ReadWithin(IdleWatchdog* w, grpc::ServerContext* ctx, Reader* reader, Message* m,
                bool* idle_out, bool first = false) {
  IdleWatchdog::ReadGuard guard(w, ctx, first);
  const bool ok = reader->Read(m);
  if (!ok && guard.timed_out()) *idle_out = true;
  return ok;
}

// The streams of each client connection that have sent nothing yet (see above).
class OpeningStreams {
 public:
  // `max_per_peer` streams of one peer may wait for their first message at once.
  explicit OpeningStreams(int max_per_peer) : max_(max_per_peer) {}
  int max_per_peer() const { return max_; }

  // Counts one opening stream of `ctx`'s peer while it waits for its first message: admitted()
  // is false (and nothing counted) when the peer has max_per_peer() already. Done() (or the
  // destructor) once the first message came, or the stream ended.
  class Guard {
   public:
    Guard(OpeningStreams* s, const grpc::ServerContext* ctx);
    ~Guard() { Done(); }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    bool admitted() const { return admitted_; }
    // Whether the stream still waits for its first message.
    bool waiting() const { return counted_; }
    void Done();
    const std::string& peer() const { return peer_; }

   private:
    OpeningStreams* s_;
    std::string peer_;
    bool admitted_ = false;
    bool counted_ = false;
  };

 private:
  const int max_;
  std::mutex mu_;
  std::map<std::string, int> opening_;  // guarded by mu_
};

}  // namespace herd::server
