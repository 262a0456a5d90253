#pragma once
// A Communicator that forwards to another one, for tests that need to see or bend what a
// collective does with its transport: count the requests it posts (validation must post none),
// pretend to hold device memory and offer native collectives, or crash a rank after its n-th
// send (a peer dying in the middle of a collective, deterministically).

#include <atomic>
#include <functional>

#include "transport/communicator.h"
#include "transport/native_collectives.h"

namespace herd::collectives::testing {

class ForwardingCommunicator : public transport::Communicator {
 public:
  explicit ForwardingCommunicator(transport::Communicator& inner) : inner_(inner) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string_view backend() const override { return inner_.backend(); }
  transport::MemoryKind memory() const override { return memory_; }
  transport::NativeCollectives* native() override { return native_; }

  transport::Request isend(int peer, transport::Tag tag, ConstBytes buf) override {
    int n = ++sends_;
    if (on_send_) on_send_(n);
    return inner_.isend(peer, tag, buf);
  }
  transport::Request irecv(int peer, transport::Tag tag, MutableBytes buf) override {
    ++recvs_;
    return inner_.irecv(peer, tag, buf);
  }
  absl::Status wait(transport::Request& req, Deadline deadline) override {
    return inner_.wait(req, deadline);
  }
  absl::Status abort(absl::Status why) override { return inner_.abort(std::move(why)); }
  absl::Status status() const override { return inner_.status(); }

  int sends() const { return sends_; }
  int recvs() const { return recvs_; }
  void set_memory(transport::MemoryKind m) { memory_ = m; }
  void set_native(transport::NativeCollectives* n) { native_ = n; }
  // Called with the 1-based number of each isend, before it is forwarded.
  void set_on_send(std::function<void(int)> f) { on_send_ = std::move(f); }

 private:
  transport::Communicator& inner_;
  transport::MemoryKind memory_ = transport::MemoryKind::kHost;
  transport::NativeCollectives* native_ = nullptr;
  std::function<void(int)> on_send_;
  std::atomic<int> sends_{0}, recvs_{0};
};

}  // namespace herd::collectives::testing
