#pragma once

// Helpers shared by the schedule primitives (schedule.cc and the family files beside this one):
// the two forms of a primitive's error, and reading or replacing a buffer in stage bodies.

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "schedules/ir/buffer.h"
#include "schedules/ir/expr_functor.h"
#include "schedules/schedule/stage.h"

namespace tessel::schedules {

// "prim: msg" as kInvalidArgument (a bad argument) or kFailedPrecondition (the state does not
// allow it); schedule.h describes the two.
absl::Status Invalid(const std::string& prim, const std::string& msg);
absl::Status Precondition(const std::string& prim, const std::string& msg);

// Whether the body of `s` reads buffer `b`.
bool Reads(const Stage& s, const Buffer* b);

// Replaces loads of one buffer by loads of another: at the same indices, or at those `reindex`
// makes of them (a new layout's: an axis split, axes fused or permuted).
class BufferReplacer : public ExprMutator {
 public:
  using Reindex = std::function<std::vector<Expr>(const std::vector<Expr>&)>;
  BufferReplacer(const Buffer* from, BufferPtr to, Reindex reindex = nullptr)
      : from_(from), to_(std::move(to)), reindex_(std::move(reindex)) {}

 protected:
  Expr VisitLoad(const LoadNode& n, const Expr& self) override;

 private:
  const Buffer* from_;
  BufferPtr to_;
  Reindex reindex_;
};

}  // namespace tessel::schedules
