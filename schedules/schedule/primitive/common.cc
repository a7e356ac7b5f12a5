#include "schedules/schedule/primitive/common.h"

#include "absl/strings/str_cat.h"
#include "schedules/ir/substitute.h"

namespace tessel::schedules {

absl::Status Invalid(const std::string& prim, const std::string& msg) {
  return absl::InvalidArgumentError(absl::StrCat(prim, ": ", msg));
}

absl::Status Precondition(const std::string& prim, const std::string& msg) {
  return absl::FailedPreconditionError(absl::StrCat(prim, ": ", msg));
}

bool Reads(const Stage& s, const Buffer* b) { return !CollectLoads(s.body, b).empty(); }

Expr BufferReplacer::VisitLoad(const LoadNode& n, const Expr& self) {
  Expr e = ExprMutator::VisitLoad(n, self);
  const auto* l = As<LoadNode>(e);
  if (l->buffer.get() == from_) return MakeLoad(to_, reindex_ ? reindex_(l->indices) : l->indices);
  return e;
}

}  // namespace tessel::schedules
