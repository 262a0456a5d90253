// The native collectives (ncclReduceScatter / ncclAllGather / ncclAllReduce with herd's chunk
// layout) against a host reference: counts 0, 1, P + 1 and 1000003 (so both the in-place and the
// padded paths run when P > 1), fp32 and fp16, every reduce op. P = 1 needs one GPU; P = the
// device count needs two or more.

#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "algorithms/collectives/allreduce.h"
#include "common/status.h"
#include "tests/support/spawn.h"
#include "tests/unit/nccl/nccl_test_util.h"
#include "transport/native_collectives.h"
#include "transport/nccl/padded_layout.h"
#include "transport/store/store.h"

namespace herd::transport::nccl::testing {
namespace {

using ::testing::HasSubstr;

constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax};
constexpr DType kDTypes[] = {DType::kFloat32, DType::kFloat16};

std::vector<size_t> Counts(int p) { return {0, 1, static_cast<size_t>(p) + 1, 1000003}; }

std::vector<double> RankVector(int rank, size_t count) {
  std::vector<double> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = TestValue(rank, i);
  return v;
}

absl::Status CheckReduceScatter(Communicator& comm, size_t count, DType dtype, ReduceOp op) {
  const std::string what =
      absl::StrFormat("reduce-scatter %s %s count %u", DTypeName(dtype), ReduceOpName(op), count);
  DeviceBuffer buf(count * DTypeSize(dtype));
  HERD_RETURN_IF_ERROR(buf.status());
  HERD_RETURN_IF_ERROR(buf.Upload(Encode(dtype, RankVector(comm.rank(), count))));
  HERD_RETURN_IF_ERROR(
      comm.native()->ReduceScatter(buf.data(), count, dtype, op, Deadline::After(kTimeout)));
  HERD_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, buf.Download());
  const PaddedLayout layout(count, comm.size());
  const size_t begin = layout.ChunkBegin(comm.rank());
  return ExpectNear(what, dtype, op, Decode(dtype, bytes), begin,
                    begin + layout.ChunkSize(comm.rank()),
                    [&](size_t i) { return Reference(dtype, op, comm.size(), i); });
}

absl::Status CheckAllGather(Communicator& comm, size_t count, DType dtype) {
  const std::string what = absl::StrFormat("all-gather %s count %u", DTypeName(dtype), count);
  const PaddedLayout layout(count, comm.size());
  // Only this rank's chunk is set; the rest holds a marker that must be overwritten.
  std::vector<double> host(count, 99.0);
  for (size_t i = layout.ChunkBegin(comm.rank()); i < layout.ChunkBegin(comm.rank() + 1); ++i) {
    host[i] = TestValue(comm.rank(), i);
  }
  DeviceBuffer buf(count * DTypeSize(dtype));
  HERD_RETURN_IF_ERROR(buf.status());
  HERD_RETURN_IF_ERROR(buf.Upload(Encode(dtype, host)));
  HERD_RETURN_IF_ERROR(
      comm.native()->AllGather(buf.data(), count, dtype, Deadline::After(kTimeout)));
  HERD_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, buf.Download());
  std::vector<int> owner(count);
  for (int c = 0; c < comm.size(); ++c) {
    for (size_t i = layout.ChunkBegin(c); i < layout.ChunkBegin(c + 1); ++i) owner[i] = c;
  }
  return ExpectNear(what, dtype, ReduceOp::kSum, Decode(dtype, bytes), 0, count,
                    [&](size_t i) { return TestValue(owner[i], i); });
}

absl::Status CheckAllReduce(Communicator& comm, size_t count, DType dtype, ReduceOp op) {
  const std::string what =
      absl::StrFormat("all-reduce %s %s count %u", DTypeName(dtype), ReduceOpName(op), count);
  DeviceBuffer buf(count * DTypeSize(dtype));
  HERD_RETURN_IF_ERROR(buf.status());
  HERD_RETURN_IF_ERROR(buf.Upload(Encode(dtype, RankVector(comm.rank(), count))));
  HERD_RETURN_IF_ERROR(
      comm.native()->AllReduce(buf.data(), count, dtype, op, Deadline::After(kTimeout)));
  HERD_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, buf.Download());
  return ExpectNear(what, dtype, op, Decode(dtype, bytes), 0, count,
                    [&](size_t i) { return Reference(dtype, op, comm.size(), i); });
}

// Every rank runs the same sequence, so NCCL sees the collectives in the same order everywhere.
absl::Status CheckAll(Communicator& comm) {
  for (DType dtype : kDTypes) {
    for (size_t count : Counts(comm.size())) {
      HERD_RETURN_IF_ERROR(CheckAllGather(comm, count, dtype));
      for (ReduceOp op : kOps) {
        HERD_RETURN_IF_ERROR(CheckReduceScatter(comm, count, dtype, op));
        HERD_RETURN_IF_ERROR(CheckAllReduce(comm, count, dtype, op));
      }
    }
  }
  return comm.status();
}

TEST(NcclNativeTest, SingleRankAllOperations) {
  HERD_REQUIRE_GPUS(1);
  auto statuses = RunNcclRanks(1, CheckAll);
  EXPECT_TRUE(herd::testing::FirstError(statuses).ok()) << herd::testing::FirstError(statuses);
}

TEST(NcclNativeTest, AllDevicesAllOperations) {
  HERD_REQUIRE_GPUS(2);
  auto statuses = RunNcclRanks(VisibleDevices(), CheckAll);
  EXPECT_TRUE(herd::testing::FirstError(statuses).ok()) << herd::testing::FirstError(statuses);
}

TEST(NcclNativeTest, RingAllReduceDelegatesToNccl) {
  HERD_REQUIRE_GPUS(2);
  // The collectives library sees MemoryKind::kCuda and must run the native op, not its host ring.
  auto statuses = RunNcclRanks(VisibleDevices(), [](Communicator& comm) -> absl::Status {
    constexpr size_t kCount = 12345;
    DeviceBuffer buf(kCount * sizeof(float));
    HERD_RETURN_IF_ERROR(buf.Upload(Encode(DType::kFloat32, RankVector(comm.rank(), kCount))));
    collectives::AllReduceOptions o;
    o.comm = &comm;
    o.data = buf.data();
    o.count = kCount;
    o.dtype = DType::kFloat32;
    o.op = ReduceOp::kAverage;
    HERD_RETURN_IF_ERROR(collectives::RingAllReduce(o));
    HERD_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, buf.Download());
    return ExpectNear("ring all-reduce on NCCL", DType::kFloat32, ReduceOp::kAverage,
                      Decode(DType::kFloat32, bytes), 0, kCount, [&](size_t i) {
                        return Reference(DType::kFloat32, ReduceOp::kAverage, comm.size(), i);
                      });
  });
  EXPECT_TRUE(herd::testing::FirstError(statuses).ok()) << herd::testing::FirstError(statuses);
}

// Validation happens before anything is issued, so a bad call fails alone: the communicator is
// not aborted and the next valid collective runs.
TEST(NcclNativeTest, InvalidArgumentsLeaveTheCommunicatorUsable) {
  HERD_REQUIRE_GPUS(1);
  auto comm = CreateNcclCommunicator(0, 1, MakeInProcessStore());
  ASSERT_TRUE(comm.ok()) << comm.status();
  NativeCollectives* native = (*comm)->native();
  DeviceBuffer buf(64 * sizeof(int32_t));
  absl::Status avg_int = native->AllReduce(buf.data(), 64, DType::kInt32, ReduceOp::kAverage,
                                           Deadline::After(kTimeout));
  EXPECT_EQ(avg_int.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(avg_int.message()), HasSubstr("all-reduce"));
  EXPECT_EQ(
      native->ReduceScatter(nullptr, 8, DType::kFloat32, ReduceOp::kSum, Deadline::After(kTimeout))
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      native->AllGather(buf.data(), 8, static_cast<DType>(77), Deadline::After(kTimeout)).code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((*comm)->status().ok());
  // Integer sums are exact and supported.
  ASSERT_TRUE(buf.Upload(Encode(DType::kInt32, std::vector<double>(64, 5))).ok());
  EXPECT_TRUE(
      native->AllReduce(buf.data(), 64, DType::kInt32, ReduceOp::kSum, Deadline::After(kTimeout))
          .ok());
}

}  // namespace
}  // namespace herd::transport::nccl::testing
