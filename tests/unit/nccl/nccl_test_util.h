#pragma once
// Helpers of the NCCL backend's tests: skipping without a GPU (with NcclUsable's reason), device
// buffers, ranks as threads with one GPU each, and the host reference of the collectives.

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "common/dtype.h"
#include "common/reduce.h"
#include "transport/communicator.h"
#include "transport/nccl/nccl_communicator.h"

namespace herd::transport::nccl::testing {

inline constexpr std::chrono::seconds kTimeout{60};

// CUDA devices this process sees; 0 when cudaGetDeviceCount fails (no driver, no device).
int VisibleDevices();

// Skips the test, with the reason, unless NCCL is usable and at least `n` devices are visible.
#define HERD_REQUIRE_GPUS(n)                                                            \
  do {                                                                                  \
    std::string herd_why_;                                                              \
    if (!::herd::transport::NcclUsable(&herd_why_)) GTEST_SKIP() << herd_why_;          \
    const int herd_have_ = ::herd::transport::nccl::testing::VisibleDevices();          \
    if (herd_have_ < (n)) {                                                             \
      GTEST_SKIP() << "needs " << (n) << " CUDA devices (one per rank), " << herd_have_ \
                   << " visible";                                                       \
    }                                                                                   \
  } while (0)

// cudaMalloc'd memory of the current device, freed on destruction.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // The allocation's status (a null data() when it failed).
  const absl::Status& status() const { return status_; }
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  absl::Status Upload(const std::vector<std::byte>& host);
  absl::StatusOr<std::vector<std::byte>> Download() const;

 private:
  void* data_ = nullptr;
  size_t bytes_;
  absl::Status status_;
};

// One thread per rank: builds the rank's NCCL communicator (device = rank) over a shared
// in-process store and runs fn on it. Returns each rank's status (bootstrap errors included).
std::vector<absl::Status> RunNcclRanks(int size,
                                       const std::function<absl::Status(Communicator&)>& fn);

// The test vector of `rank`: small integers in [-8, 8], so that sums over up to 256 ranks are
// exact in fp16 and the only rounding is avg's division.
double TestValue(int rank, size_t i);

// Host encoding of `values` as `dtype` (fp32, fp64, fp16, bf16, int32, int64) and back.
std::vector<std::byte> Encode(DType dtype, const std::vector<double>& values);
std::vector<double> Decode(DType dtype, const std::vector<std::byte>& bytes);

// The reduction over `size` ranks of TestValue at element i, rounded to `dtype`.
double Reference(DType dtype, ReduceOp op, int size, size_t i);

// OK when got[i] matches want(i) for every i in [begin, end) within the tolerance of dtype and
// op; otherwise names the first mismatch.
absl::Status ExpectNear(std::string_view what, DType dtype, ReduceOp op,
                        const std::vector<double>& got, size_t begin, size_t end,
                        const std::function<double(size_t)>& want);

}  // namespace herd::transport::nccl::testing
