#pragma once
// A Communicator that forwards to another one and records which ranks this rank posted sends
// to and receives from, so a test can check that an algorithm talked to exactly the peers it
// was given.

#include <mutex>
#include <set>

#include "tests/unit/collectives/forwarding_communicator.h"

namespace herd::decentralized::testing {

class RecordingCommunicator : public collectives::testing::ForwardingCommunicator {
 public:
  using ForwardingCommunicator::ForwardingCommunicator;

  transport::Request isend(int peer, transport::Tag tag, ConstBytes buf) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      sent_to_.insert(peer);
    }
    return ForwardingCommunicator::isend(peer, tag, buf);
  }
  transport::Request irecv(int peer, transport::Tag tag, MutableBytes buf) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      received_from_.insert(peer);
    }
    return ForwardingCommunicator::irecv(peer, tag, buf);
  }

  std::set<int> sent_to() const {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_to_;
  }
  std::set<int> received_from() const {
    std::lock_guard<std::mutex> lock(mu_);
    return received_from_;
  }

 private:
  mutable std::mutex mu_;
  std::set<int> sent_to_, received_from_;
};

}  // namespace herd::decentralized::testing
