#pragma once
// A plain HTTP/1.0 GET over a loopback TCP socket, for tests that read herd's metrics
// endpoints and Prometheus' HTTP API (herd has no HTTP client, and the tests need none more).

#include <string>

#include "absl/status/statusor.h"

namespace herd::testing {

struct HttpResponse {
  int status = 0;    // 200, 404, ...
  std::string body;  // after the headers
};

// GET http://host:port/target within `timeout_ms` (connect, send and read together).
absl::StatusOr<HttpResponse> HttpGet(const std::string& host, int port, const std::string& target,
                                     int timeout_ms = 5000);

}  // namespace herd::testing
