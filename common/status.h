#pragma once
// Status conventions of herd: absl::Status / absl::StatusOr cross every module boundary.
// Nothing a peer, a file or a user sends may abort the process; it becomes a Status.

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define HERD_STATUS_CONCAT_INNER_(a, b) a##b
#define HERD_STATUS_CONCAT_(a, b) HERD_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define HERD_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::absl::Status herd_status_ = (expr);        \
    if (!herd_status_.ok()) return herd_status_; \
  } while (0)

// `HERD_ASSIGN_OR_RETURN(auto x, MakeX());` unwraps a StatusOr or returns its error.
#define HERD_ASSIGN_OR_RETURN(lhs, expr) \
  HERD_ASSIGN_OR_RETURN_IMPL_(HERD_STATUS_CONCAT_(herd_statusor_, __LINE__), lhs, expr)
#define HERD_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
