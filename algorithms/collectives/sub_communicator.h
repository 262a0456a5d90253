#pragma once
// A communicator over some ranks of another: rank i of the view is parent rank ranks[i]. Every
// operation goes to the parent (tags unchanged), so an algorithm runs on a subset of ranks, as
// the hierarchical collectives do on a rail (one rank per host) or on the hosts' leaders.
// Errors name parent ranks; abort() aborts the parent. Internal to algorithms/collectives.

#include <utility>
#include <vector>

#include "transport/communicator.h"

namespace herd::collectives::internal {

class SubCommunicator final : public transport::Communicator {
 public:
  // `ranks` must hold parent.rank(); the view is valid while the parent is.
  SubCommunicator(transport::Communicator& parent, std::vector<int> ranks)
      : parent_(parent), ranks_(std::move(ranks)) {
    for (size_t i = 0; i < ranks_.size(); ++i) {
      if (ranks_[i] == parent.rank()) rank_ = static_cast<int>(i);
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(ranks_.size()); }
  std::string_view backend() const override { return parent_.backend(); }
  transport::MemoryKind memory() const override { return parent_.memory(); }

  transport::Request isend(int peer, transport::Tag tag, ConstBytes buf) override {
    return parent_.isend(Parent(peer), tag, buf);
  }
  transport::Request irecv(int peer, transport::Tag tag, MutableBytes buf) override {
    return parent_.irecv(Parent(peer), tag, buf);
  }
  absl::Status wait(transport::Request& req, Deadline deadline) override {
    return parent_.wait(req, deadline);
  }
  absl::Status abort(absl::Status why) override { return parent_.abort(std::move(why)); }
  absl::Status status() const override { return parent_.status(); }

 private:
  // Out of range maps to -1, which the parent refuses with its own error.
  int Parent(int peer) const {
    return peer >= 0 && peer < size() ? ranks_[static_cast<size_t>(peer)] : -1;
  }
  transport::Communicator& parent_;
  std::vector<int> ranks_;
  int rank_ = -1;
};

}  // namespace herd::collectives::internal
