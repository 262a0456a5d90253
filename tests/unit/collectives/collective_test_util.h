#pragma once
// Shared by the collectives' tests: deterministic per-rank inputs, locally computed references,
// element-exact comparisons, and a threads-as-ranks runner that exposes its fabric (to kill a
// rank mid-collective).
//
// Inputs are small integers (in [-8, 8]) so that every partial sum of up to 16 ranks (|s| <= 128)
// is exact in every dtype, bf16 included (8 significant bits: integers up to 256 are exact).
// Results can then be compared bit for bit whatever the order of the reduction; an average is
// the exact sum multiplied once by the dtype-rounded 1/P and rounded once to the dtype, which is
// what "divide once, at the end" must produce (dividing earlier would round differently).

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "common/dtype.h"
#include "common/reduce.h"
#include "common/status.h"
#include "tests/support/spawn.h"
#include "transport/communicator.h"
#include "transport/loopback/loopback_communicator.h"

namespace herd::collectives::testing {

using Buffer = std::vector<std::byte>;
using herd::testing::FirstError;

constexpr std::chrono::milliseconds kTimeout{std::chrono::seconds(30)};
constexpr double kSentinel = 99;  // fills what a rank must receive; exact in every dtype

// The input of `rank` at element i: an integer in [-8, 8].
double InputValue(int rank, size_t i);

void Store(DType dtype, void* base, size_t i, double v);
double Load(DType dtype, const void* base, size_t i);
// `count` elements whose value at i is value(i).
Buffer Encode(DType dtype, size_t count, const std::function<double(size_t)>& value);
Buffer Input(DType dtype, size_t count, int rank);
Buffer Filled(DType dtype, size_t count, double v);
// Element i of the reduction of every rank's Input (see the header comment for avg).
Buffer Reference(DType dtype, ReduceOp op, int size, size_t count);

// Compares elements [first, first + n) of got and want bit for bit; on a mismatch names the
// first differing element and both values.
::testing::AssertionResult SameElements(DType dtype, const Buffer& got, const Buffer& want,
                                        size_t first, size_t n);

// The element counts of the sweep for P ranks: 0, 1, P-1, P+1 (deduplicated).
std::vector<size_t> SmallCounts(int size);
constexpr size_t kMidCount = 10007;  // with 64-byte segments: many segments per chunk
constexpr size_t kLargeCount = 1000003;

std::string CaseName(int size, size_t count, DType dtype, ReduceOp op);

// One thread per rank over a fresh fabric; fn(comm, fabric) returns the rank's status.
std::vector<absl::Status> RunRanks(
    int size,
    const std::function<absl::Status(transport::Communicator&, transport::LoopbackFabric&)>& fn);
// The same over a fabric whose rank r is on host hosts[r] (LoopbackFabric::Create with hosts):
// ranks with one label share a shared-memory segment.
std::vector<absl::Status> RunRanksOnHosts(
    const std::vector<std::string>& hosts,
    const std::function<absl::Status(transport::Communicator&, transport::LoopbackFabric&)>& fn);

}  // namespace herd::collectives::testing
