#include "tests/unit/nccl/nccl_test_util.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>

#include "absl/strings/str_format.h"
#include "common/half.h"
#include "transport/store/store.h"

namespace herd::transport::nccl::testing {

int VisibleDevices() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  cudaError_t e = cudaMalloc(&data_, std::max<size_t>(bytes, 1));
  if (e != cudaSuccess) {
    data_ = nullptr;
    status_ = absl::InternalError(
        absl::StrFormat("cudaMalloc of %u bytes failed: %s", bytes, cudaGetErrorString(e)));
  }
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);
}

absl::Status DeviceBuffer::Upload(const std::vector<std::byte>& host) {
  if (host.size() != bytes_) return absl::InvalidArgumentError("upload size mismatch");
  cudaError_t e = cudaMemcpy(data_, host.data(), bytes_, cudaMemcpyHostToDevice);
  // From pageable memory cudaMemcpy may return before the DMA has landed, and the communicator's
  // stream does not wait for the legacy default stream: finish the copy here.
  if (e == cudaSuccess) e = cudaStreamSynchronize(cudaStreamLegacy);
  if (e != cudaSuccess) {
    return absl::InternalError(absl::StrFormat("cudaMemcpy H2D: %s", cudaGetErrorString(e)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::byte>> DeviceBuffer::Download() const {
  std::vector<std::byte> host(bytes_);
  // cudaMemcpy synchronises with the legacy default stream only; the communicator's stream is
  // non-blocking, but every test downloads after wait() returned, when its work is complete.
  cudaError_t e = cudaMemcpy(host.data(), data_, bytes_, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) {
    return absl::InternalError(absl::StrFormat("cudaMemcpy D2H: %s", cudaGetErrorString(e)));
  }
  return host;
}

std::vector<absl::Status> RunNcclRanks(int size,
                                       const std::function<absl::Status(Communicator&)>& fn) {
  std::shared_ptr<Store> store = MakeInProcessStore();
  std::vector<absl::Status> statuses(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      NcclOptions options;
      options.device = r;
      options.bootstrap_timeout = kTimeout;
      absl::StatusOr<std::unique_ptr<Communicator>> comm =
          CreateNcclCommunicator(r, size, store, options);
      statuses[r] = comm.ok() ? fn(**comm) : comm.status();
    });
  }
  for (auto& t : threads) t.join();
  return statuses;
}

double TestValue(int rank, size_t i) {
  return static_cast<double>(static_cast<int>((i * 7 + static_cast<size_t>(rank) * 3) % 17) - 8);
}

std::vector<std::byte> Encode(DType dtype, const std::vector<double>& values) {
  std::vector<std::byte> out(values.size() * DTypeSize(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    std::byte* at = out.data() + i * DTypeSize(dtype);
    const double v = values[i];
    switch (dtype) {
      case DType::kFloat32: {
        float f = static_cast<float>(v);
        std::memcpy(at, &f, sizeof f);
        break;
      }
      case DType::kFloat64:
        std::memcpy(at, &v, sizeof v);
        break;
      case DType::kFloat16: {
        uint16_t h = FloatToFP16(static_cast<float>(v));
        std::memcpy(at, &h, sizeof h);
        break;
      }
      case DType::kBFloat16: {
        uint16_t h = FloatToBF16(static_cast<float>(v));
        std::memcpy(at, &h, sizeof h);
        break;
      }
      case DType::kInt32: {
        int32_t x = static_cast<int32_t>(v);
        std::memcpy(at, &x, sizeof x);
        break;
      }
      case DType::kInt64: {
        int64_t x = static_cast<int64_t>(v);
        std::memcpy(at, &x, sizeof x);
        break;
      }
      case DType::kUInt8: {
        uint8_t x = static_cast<uint8_t>(v);
        std::memcpy(at, &x, sizeof x);
        break;
      }
    }
  }
  return out;
}

std::vector<double> Decode(DType dtype, const std::vector<std::byte>& bytes) {
  const size_t es = DTypeSize(dtype);
  std::vector<double> out(bytes.size() / es);
  for (size_t i = 0; i < out.size(); ++i) {
    const std::byte* at = bytes.data() + i * es;
    switch (dtype) {
      case DType::kFloat32: {
        float f;
        std::memcpy(&f, at, sizeof f);
        out[i] = f;
        break;
      }
      case DType::kFloat64:
        std::memcpy(&out[i], at, sizeof(double));
        break;
      case DType::kFloat16:
      case DType::kBFloat16: {
        uint16_t h;
        std::memcpy(&h, at, sizeof h);
        out[i] = dtype == DType::kFloat16 ? FP16ToFloat(h) : BF16ToFloat(h);
        break;
      }
      case DType::kInt32: {
        int32_t x;
        std::memcpy(&x, at, sizeof x);
        out[i] = x;
        break;
      }
      case DType::kInt64: {
        int64_t x;
        std::memcpy(&x, at, sizeof x);
        out[i] = static_cast<double>(x);
        break;
      }
      case DType::kUInt8:
        out[i] = static_cast<double>(static_cast<uint8_t>(*at));
        break;
    }
  }
  return out;
}

double Reference(DType dtype, ReduceOp op, int size, size_t i) {
  double acc = TestValue(0, i);
  for (int r = 1; r < size; ++r) {
    const double v = TestValue(r, i);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage:
        acc += v;
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, v);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, v);
        break;
    }
  }
  if (op == ReduceOp::kAverage) acc /= size;
  return Decode(dtype, Encode(dtype, {acc}))[0];
}

absl::Status ExpectNear(std::string_view what, DType dtype, ReduceOp op,
                        const std::vector<double>& got, size_t begin, size_t end,
                        const std::function<double(size_t)>& want) {
  // Sums, minima and maxima of small integers are exact in every dtype; an average may differ by
  // the rounding of the division (NCCL may scale before or after summing).
  double tol = 0;
  if (op == ReduceOp::kAverage) {
    tol = dtype == DType::kFloat16 ? 1e-2 : dtype == DType::kBFloat16 ? 8e-2 : 1e-5;
  }
  for (size_t i = begin; i < end; ++i) {
    const double w = want(i);
    if (!(std::fabs(got[i] - w) <= tol)) {
      return absl::InternalError(absl::StrFormat("%s: element %u is %g, expected %g (tolerance %g)",
                                                 what, i, got[i], w, tol));
    }
  }
  return absl::OkStatus();
}

}  // namespace herd::transport::nccl::testing
