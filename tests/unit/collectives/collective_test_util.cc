#include "tests/unit/collectives/collective_test_util.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>

#include "absl/strings/str_format.h"
#include "common/half.h"

namespace herd::collectives::testing {

double InputValue(int rank, size_t i) {
  return static_cast<double>((i * 7 + static_cast<size_t>(rank) * 13) % 17) - 8.0;
}

void Store(DType dtype, void* base, size_t i, double v) {
  switch (dtype) {
    case DType::kFloat32:
      static_cast<float*>(base)[i] = static_cast<float>(v);
      return;
    case DType::kFloat64:
      static_cast<double*>(base)[i] = v;
      return;
    case DType::kFloat16:
      static_cast<uint16_t*>(base)[i] = FloatToFP16(static_cast<float>(v));
      return;
    case DType::kBFloat16:
      static_cast<uint16_t*>(base)[i] = FloatToBF16(static_cast<float>(v));
      return;
    case DType::kInt32:
      static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v);
      return;
    case DType::kInt64:
      static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v);
      return;
    case DType::kUInt8:
      static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v);
      return;
  }
}

double Load(DType dtype, const void* base, size_t i) {
  switch (dtype) {
    case DType::kFloat32:
      return static_cast<const float*>(base)[i];
    case DType::kFloat64:
      return static_cast<const double*>(base)[i];
    case DType::kFloat16:
      return FP16ToFloat(static_cast<const uint16_t*>(base)[i]);
    case DType::kBFloat16:
      return BF16ToFloat(static_cast<const uint16_t*>(base)[i]);
    case DType::kInt32:
      return static_cast<const int32_t*>(base)[i];
    case DType::kInt64:
      return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case DType::kUInt8:
      return static_cast<const uint8_t*>(base)[i];
  }
  return 0;
}

Buffer Encode(DType dtype, size_t count, const std::function<double(size_t)>& value) {
  Buffer b(count * DTypeSize(dtype));
  for (size_t i = 0; i < count; ++i) Store(dtype, b.data(), i, value(i));
  return b;
}

namespace {

// InputValue has period 17 in i: encode one period and tile it (the large sweeps would otherwise
// spend most of their time converting elements one by one).
constexpr size_t kPeriod = 17;

Buffer Tiled(DType dtype, size_t count, const std::function<double(size_t)>& value) {
  const size_t es = DTypeSize(dtype);
  Buffer period = Encode(dtype, kPeriod, value);
  Buffer b(count * es);
  for (size_t i = 0; i < count; i += kPeriod) {
    std::memcpy(b.data() + i * es, period.data(), std::min(kPeriod, count - i) * es);
  }
  return b;
}

}  // namespace

Buffer Input(DType dtype, size_t count, int rank) {
  return Tiled(dtype, count, [rank](size_t i) { return InputValue(rank, i); });
}

Buffer Filled(DType dtype, size_t count, double v) {
  return Tiled(dtype, count, [v](size_t) { return v; });
}

namespace {

// The sum / min / max of every rank's input at i, exact in double.
double Combine(ReduceOp op, int size, size_t i) {
  double acc = InputValue(0, i);
  for (int q = 1; q < size; ++q) {
    double v = InputValue(q, i);
    acc = op == ReduceOp::kMin   ? std::min(acc, v)
          : op == ReduceOp::kMax ? std::max(acc, v)
                                 : acc + v;
  }
  return acc;
}

}  // namespace

Buffer Reference(DType dtype, ReduceOp op, int size, size_t count) {
  return Tiled(dtype, count, [&](size_t i) {
    double v = Combine(op, size, i);
    if (op != ReduceOp::kAverage || size == 1) return v;
    // The sum is exact in the dtype; scale it once, rounding like the dtype's arithmetic does.
    if (dtype == DType::kFloat64) return v * (1.0 / size);
    return static_cast<double>(static_cast<float>(v) * static_cast<float>(1.0 / size));
  });
}

::testing::AssertionResult SameElements(DType dtype, const Buffer& got, const Buffer& want,
                                        size_t first, size_t n) {
  const size_t es = DTypeSize(dtype);
  if (got.size() < (first + n) * es || want.size() < (first + n) * es) {
    return ::testing::AssertionFailure() << "buffers shorter than the compared range";
  }
  if (n == 0 || std::memcmp(got.data() + first * es, want.data() + first * es, n * es) == 0) {
    return ::testing::AssertionSuccess();
  }
  for (size_t i = first; i < first + n; ++i) {
    if (std::memcmp(got.data() + i * es, want.data() + i * es, es) != 0) {
      return ::testing::AssertionFailure()
             << "element " << i << " is " << Load(dtype, got.data(), i) << ", expected "
             << Load(dtype, want.data(), i);
    }
  }
  return ::testing::AssertionSuccess();
}

std::vector<size_t> SmallCounts(int size) {
  std::vector<size_t> counts{0, 1};
  for (size_t c : {static_cast<size_t>(size - 1), static_cast<size_t>(size + 1)}) {
    if (std::find(counts.begin(), counts.end(), c) == counts.end()) counts.push_back(c);
  }
  return counts;
}

std::string CaseName(int size, size_t count, DType dtype, ReduceOp op) {
  return absl::StrFormat("P=%d count=%u dtype=%s op=%s", size, count, DTypeName(dtype),
                         ReduceOpName(op));
}

std::vector<absl::Status> RunRanksOnHosts(
    const std::vector<std::string>& hosts, int size,
    const std::function<absl::Status(transport::Communicator&, transport::LoopbackFabric&)>& fn);

std::vector<absl::Status> RunRanks(
    int size,
    const std::function<absl::Status(transport::Communicator&, transport::LoopbackFabric&)>& fn) {
  return RunRanksOnHosts(std::vector<std::string>(), size, fn);
}

std::vector<absl::Status> RunRanksOnHosts(
    const std::vector<std::string>& hosts,
    const std::function<absl::Status(transport::Communicator&, transport::LoopbackFabric&)>& fn) {
  return RunRanksOnHosts(hosts, static_cast<int>(hosts.size()), fn);
}

std::vector<absl::Status> RunRanksOnHosts(
    const std::vector<std::string>& hosts, int size,
    const std::function<absl::Status(transport::Communicator&, transport::LoopbackFabric&)>& fn) {
  auto fabric = hosts.empty() ? transport::LoopbackFabric::Create(size)
                              : transport::LoopbackFabric::Create(size, hosts);
  std::vector<std::unique_ptr<transport::Communicator>> comms;
  for (int r = 0; r < size; ++r) comms.push_back(fabric->communicator(r));
  std::vector<absl::Status> statuses(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] { statuses[r] = fn(*comms[r], *fabric); });
  }
  for (auto& t : threads) t.join();
  return statuses;
}

}  // namespace herd::collectives::testing
