#pragma once
// Ends client streams that go silent. gRPC's synchronous server gives each call a thread, and
// a stream's Read() blocks until the client sends, cancels or its deadline passes; a client
// that opens Push/PushPull/InitKeys streams and sends nothing (and gave no deadline) would hold
// those threads for good, and a shard with a small --threads would stop answering everyone.
// The watchdog cancels a call that has waited longer than `idle` for its next message, which
// wakes the Read() and frees the thread; the client sees CANCELLED.
//
// Only the client's silence counts: the guard is armed around each Read() and disarmed while
// the shard itself works or waits on a round (those waits have their own deadlines).
//
// Thread-safe. One watchdog thread per shard server.

#include <grpcpp/server_context.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

namespace herd::server {

class IdleWatchdog {
 public:
  explicit IdleWatchdog(std::chrono::milliseconds idle);
  ~IdleWatchdog();
  IdleWatchdog(const IdleWatchdog&) = delete;
  IdleWatchdog& operator=(const IdleWatchdog&) = delete;

  std::chrono::milliseconds idle() const { return idle_; }

  // Armed for the time of one Read(): `ctx` is cancelled if the read lasts longer than idle().
  class ReadGuard {
   public:
    ReadGuard(IdleWatchdog* w, grpc::ServerContext* ctx);
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

// Reads the next message of a stream with the watchdog armed. False at the end of the stream,
// when the client cancelled, or when it stayed silent too long (then *idle_out is set).
template <typename Reader, typename Message>
bool ReadWithin(IdleWatchdog* w, grpc::ServerContext* ctx, Reader* reader, Message* m,
                bool* idle_out) {
  IdleWatchdog::ReadGuard guard(w, ctx);
  const bool ok = reader->Read(m);
  if (!ok && guard.timed_out()) *idle_out = true;
  return ok;
}

}  // namespace herd::server
