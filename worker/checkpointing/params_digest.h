#pragma once
// A digest of a model's parameters, so two runs can be compared exactly (`params_digest` in
// `herd local --json` and `herd job status --json`): XXH3-64 over every tensor's fp32 bytes in
// forward order, as 16 lowercase hex digits. Equal digests: equal parameters, bit for bit.

#include <string>
#include <vector>

#include "worker/executor.h"

namespace herd::worker {

std::string ParamsDigest(const std::vector<ModelTensor>& tensors);

}  // namespace herd::worker
