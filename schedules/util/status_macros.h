#pragma once

// Early-return plumbing for absl::Status and absl::StatusOr.
//   TESSEL_RETURN_IF_ERROR(DoThing());
//   TESSEL_ASSIGN_OR_RETURN(auto loops, sch.GetLoops(block));

#include <utility>

#define TESSEL_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::absl::Status tessel_status_ = (expr);          \
    if (!tessel_status_.ok()) return tessel_status_; \
  } while (0)

#define TESSEL_STATUS_CONCAT_INNER_(a, b) a##b
#define TESSEL_STATUS_CONCAT_(a, b) TESSEL_STATUS_CONCAT_INNER_(a, b)
#define TESSEL_ASSIGN_OR_RETURN(decl, expr) \
  TESSEL_ASSIGN_OR_RETURN_IMPL_(TESSEL_STATUS_CONCAT_(tessel_or_, __LINE__), decl, expr)
#define TESSEL_ASSIGN_OR_RETURN_IMPL_(tmp, decl, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  decl = std::move(*tmp)
