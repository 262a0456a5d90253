// Communicators holding device memory: the ring operations (and "native" through the
// dispatcher) must delegate to the backend's NativeCollectives; every other algorithm must
// refuse with FAILED_PRECONDITION instead of touching the buffer on the host.
//
// The stand-in device backend forwards to a loopback communicator, reports MemoryKind::kCuda and
// implements its native collectives with the host ring on the inner communicator, so results
// can still be checked.

#include <atomic>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "algorithms/collectives/alltoall.h"
#include "algorithms/collectives/run.h"
#include "tests/unit/collectives/collective_test_util.h"
#include "tests/unit/collectives/forwarding_communicator.h"

namespace herd::collectives::testing {
namespace {

using ::testing::HasSubstr;
using transport::Communicator;
using transport::LoopbackFabric;

class HostRingAsNative : public transport::NativeCollectives {
 public:
  explicit HostRingAsNative(Communicator& host) : host_(host) {}
  absl::Status ReduceScatter(void* data, size_t count, DType dtype, ReduceOp op,
                             Deadline) override {
    ++calls;
    ReduceScatterOptions o;
    Fill(o, data, count, dtype);
    o.op = op;
    return RingReduceScatter(o);
  }
  absl::Status AllGather(void* data, size_t count, DType dtype, Deadline) override {
    ++calls;
    AllGatherOptions o;
    Fill(o, data, count, dtype);
    return RingAllGather(o);
  }
  absl::Status AllReduce(void* data, size_t count, DType dtype, ReduceOp op, Deadline) override {
    ++calls;
    AllReduceOptions o;
    Fill(o, data, count, dtype);
    o.op = op;
    return RingAllReduce(o);
  }
  std::atomic<int> calls{0};

 private:
  template <typename Options>
  void Fill(Options& o, void* data, size_t count, DType dtype) {
    o.comm = &host_;
    o.data = data;
    o.count = count;
    o.dtype = dtype;
    o.timeout = kTimeout;
  }
  Communicator& host_;
};

// Runs fn on P ranks whose communicators claim device memory; returns statuses, and the
// request count the collectives posted on the device communicators themselves (expected: 0).
struct DeviceRun {
  std::vector<absl::Status> statuses;
  int device_requests = 0;
  int native_calls = 0;
};
DeviceRun RunOnDevice(int P, bool with_native,
                      const std::function<absl::Status(Communicator&)>& fn) {
  DeviceRun run;
  std::atomic<int> requests{0}, calls{0};
  run.statuses = RunRanks(P, [&](Communicator& host, LoopbackFabric&) {
    HostRingAsNative native(host);
    ForwardingCommunicator device(host);
    device.set_memory(transport::MemoryKind::kCuda);
    if (with_native) device.set_native(&native);
    absl::Status s = fn(device);
    requests += device.sends() + device.recvs();
    calls += native.calls;
    return s;
  });
  run.device_requests = requests;
  run.native_calls = calls;
  return run;
}

TEST(NativeTest, RingOperationsDelegateToTheBackend) {
  const int P = 3;
  const size_t count = 100;
  const Buffer want = Reference(DType::kFloat32, ReduceOp::kSum, P, count);
  std::vector<Buffer> bufs(P);
  for (int q = 0; q < P; ++q) bufs[q] = Input(DType::kFloat32, count, q);
  DeviceRun run = RunOnDevice(P, true, [&](Communicator& comm) {
    ReduceScatterOptions rs;
    rs.comm = &comm;
    rs.data = bufs[comm.rank()].data();
    rs.count = count;
    HERD_RETURN_IF_ERROR(RingReduceScatter(rs));
    AllGatherOptions ag;
    ag.comm = &comm;
    ag.data = rs.data;
    ag.count = count;
    return RingAllGather(ag);
  });
  ASSERT_TRUE(FirstError(run.statuses).ok()) << FirstError(run.statuses);
  EXPECT_EQ(run.native_calls, 2 * P);
  EXPECT_EQ(run.device_requests, 0);
  for (int q = 0; q < P; ++q) EXPECT_TRUE(SameElements(DType::kFloat32, bufs[q], want, 0, count));
}

TEST(NativeTest, DispatcherRingAndNativeAllReduceDelegate) {
  const int P = 4;
  const size_t count = 33;
  for (Algorithm a : {Algorithm::kRing, Algorithm::kNative}) {
    SCOPED_TRACE(AlgorithmName(a));
    const Buffer want = Reference(DType::kFloat64, ReduceOp::kAverage, P, count);
    std::vector<Buffer> bufs(P);
    for (int q = 0; q < P; ++q) bufs[q] = Input(DType::kFloat64, count, q);
    DeviceRun run = RunOnDevice(P, true, [&](Communicator& comm) {
      AllReduceOptions o;
      o.comm = &comm;
      o.dtype = DType::kFloat64;
      o.op = ReduceOp::kAverage;
      o.data = bufs[comm.rank()].data();
      o.count = count;
      return AllReduce(o, a);
    });
    ASSERT_TRUE(FirstError(run.statuses).ok()) << FirstError(run.statuses);
    EXPECT_EQ(run.native_calls, P);
    EXPECT_EQ(run.device_requests, 0);
    for (int q = 0; q < P; ++q) EXPECT_TRUE(SameElements(DType::kFloat64, bufs[q], want, 0, count));
  }
}

TEST(NativeTest, HostAlgorithmsRefuseDeviceMemory) {
  float data[16] = {};
  DeviceRun run = RunOnDevice(2, true, [&](Communicator& comm) -> absl::Status {
    AllReduceOptions ar;
    ar.comm = &comm;
    ar.data = data;
    ar.count = 16;
    AllGatherOptions ag;
    ag.comm = &comm;
    ag.data = data;
    ag.count = 16;
    BroadcastOptions b;
    b.comm = &comm;
    b.data = data;
    b.count = 16;
    ReduceOptions r;
    r.comm = &comm;
    r.data = data;
    r.count = 16;
    AllToAllOptions t;
    t.comm = &comm;
    t.input = data;
    t.output = data + 8;
    t.count = 4;
    for (absl::Status s :
         {AllReduce(ar, Algorithm::kLinearPipeline), AllReduce(ar, Algorithm::kBinomialTree),
          AllGather(ag, Algorithm::kRecursiveDoubling), AllGather(ag, Algorithm::kBruck),
          Broadcast(b, Algorithm::kLinearPipeline), Broadcast(b, Algorithm::kBinomialTree),
          Reduce(r, Algorithm::kLinearPipeline), Reduce(r, Algorithm::kBinomialTree),
          PairwiseAllToAll(t)}) {
      if (s.code() != absl::StatusCode::kFailedPrecondition ||
          std::string(s.message()).find("needs host memory") == std::string::npos) {
        return absl::InternalError(
            absl::StrFormat("expected FAILED_PRECONDITION, got %s", s.ToString()));
      }
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(FirstError(run.statuses).ok()) << FirstError(run.statuses);
  EXPECT_EQ(run.device_requests, 0);
  EXPECT_EQ(run.native_calls, 0);
}

TEST(NativeTest, NoNativeCollectivesIsFailedPrecondition) {
  float data[4] = {};
  DeviceRun run = RunOnDevice(2, false, [&](Communicator& comm) {
    AllReduceOptions o;
    o.comm = &comm;
    o.data = data;
    o.count = 4;
    return RingAllReduce(o);
  });
  for (const absl::Status& s : run.statuses) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("no native collectives"));
  }
  // "native" on a plain host communicator (the loopback has none) fails the same way.
  auto comms = transport::MakeLoopbackCommunicators(2);
  AllGatherOptions g;
  g.comm = comms[0].get();
  g.data = data;
  g.count = 4;
  absl::Status s = AllGather(g, Algorithm::kNative);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("loopback backend has no native collectives"));
}

}  // namespace
}  // namespace herd::collectives::testing
