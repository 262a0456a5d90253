#pragma once
// A Communicator that counts the bytes this worker sends into a metric
// (herd_worker_sent_bytes_total{mode, peer="worker"}, docs/metrics.md) and forwards every call
// to the backend it wraps. The session wraps each stretch's communicator with the counter of
// its mode, so the algorithms stay unaware of metrics. One atomic add per isend, whatever its
// size. Collectives a backend runs natively (NCCL on GPU memory: native()) are not counted.

#include <prometheus/counter.h>

#include <memory>

#include "transport/communicator.h"

namespace herd::worker {

class CountingCommunicator final : public transport::Communicator {
 public:
  CountingCommunicator(std::unique_ptr<transport::Communicator> inner, prometheus::Counter& sent)
      : inner_(std::move(inner)), sent_(sent) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string_view backend() const override { return inner_->backend(); }
  transport::MemoryKind memory() const override { return inner_->memory(); }
  transport::NativeCollectives* native() override { return inner_->native(); }

  transport::Request isend(int peer, transport::Tag tag, ConstBytes buf) override {
    sent_.Increment(static_cast<double>(buf.size()));
    return inner_->isend(peer, tag, buf);
  }
  transport::Request irecv(int peer, transport::Tag tag, MutableBytes buf) override {
    return inner_->irecv(peer, tag, buf);
  }
  absl::Status wait(transport::Request& req, Deadline deadline) override {
    return inner_->wait(req, deadline);
  }
  absl::Status abort(absl::Status why) override { return inner_->abort(std::move(why)); }
  absl::Status status() const override { return inner_->status(); }

 private:
  std::unique_ptr<transport::Communicator> inner_;
  prometheus::Counter& sent_;
};

}  // namespace herd::worker
