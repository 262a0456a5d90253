#pragma once
// One UCP context and worker: the UCX resources behind one UcxCommunicator. Created with the
// tag and wakeup features, in serialized thread mode: the communicator lets one thread at a
// time call into the worker (its own mutex), so UCX needs no lock of its own.

#include <ucp/api/ucp.h>

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace herd::transport::ucx {

// An absl::Status with `code` whose message is "<what>: UCX <ucs_status_string(s)>".
absl::Status UcsError(absl::StatusCode code, ucs_status_t s, std::string_view what);

struct WorkerConfig {
  // Move every message as eager fragments through the receiver's shared-memory FIFO instead of
  // by rendezvous (cross-memory attach); see UcxOptions::same_host_zero_copy for why.
  bool copy_through_fifo = true;
};

class UcxWorker {
 public:
  static absl::StatusOr<std::unique_ptr<UcxWorker>> Create(const WorkerConfig& config);
  ~UcxWorker();  // destroys the worker, then the context
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  ucp_worker_h worker() const { return worker_; }
  // Becomes readable when the worker, armed by ucp_worker_arm(), has events to progress.
  int event_fd() const { return event_fd_; }
  // The packed worker address peers connect to.
  const std::string& address() const { return address_; }

 private:
  UcxWorker() = default;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;
  std::string address_;
};

// The transports of an endpoint's lanes as UCX names them, e.g. "sysv/memory.0 cma/memory.0"
// (parsed from ucp_ep_print_info, the only way UCX 1.13 tells). Empty if it could not be read.
std::string DescribeLanes(ucp_ep_h ep);

// True if every transport in a DescribeLanes() string is a shared-memory one (or "self"): an
// endpoint that moves no byte over a network.
bool LanesAreSharedMemory(std::string_view lanes);

}  // namespace herd::transport::ucx
