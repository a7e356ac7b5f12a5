// Loop kinds and bindings: bind a loop to a thread axis, or make it parallel, vectorized or
// unrolled.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "schedules/schedule/instruction_table.h"
#include "schedules/schedule/primitive/common.h"
#include "schedules/schedule/primitive/register.h"
#include "schedules/schedule/schedule.h"
#include "schedules/util/status_macros.h"

namespace tessel::schedules {

namespace {

constexpr char kBind[] = "bind";
constexpr char kParallel[] = "parallel";
constexpr char kVectorize[] = "vectorize";
constexpr char kUnroll[] = "unroll";

absl::Status MarkLoop(Stage* s, int iter, ForKind kind, const char* prim, const std::string& desc) {
  IterVar& iv = s->iters[iter];
  if (iv.thread != ThreadTag::kNone || iv.kind != ForKind::kSerial) {
    return Precondition(
        prim, absl::StrCat(desc, " is already ",
                           iv.thread != ThreadTag::kNone ? std::string(ThreadTagName(iv.thread))
                                                         : std::string(ForKindName(iv.kind))));
  }
  // A vectorized reduction loop reads its operands as vectors and accumulates the lanes in
  // order (codegen), so only parallel is refused.
  if (iv.reduce && kind == ForKind::kParallel) {
    return Invalid(prim, absl::StrCat("cannot make reduction ", desc, " ", ForKindName(kind),
                                      ": its iterations depend on each other"));
  }
  iv.kind = kind;
  return absl::OkStatus();
}

}  // namespace

absl::Status Schedule::Bind(LoopRV loop, const std::string& thread) {
  const char* prim = kBind;
  auto l = MutableLoop(loop, prim);
  if (!l.ok()) return l.status();
  auto [s, iter] = *l;
  ThreadTag tag;
  if (!ParseThreadTag(thread, &tag)) {
    return Invalid(prim, absl::StrCat("unknown thread axis '", thread,
                                      "'; use blockIdx.x|y|z, threadIdx.x|y|z, vthread or "
                                      "cluster.x"));
  }
  IterVar& iv = s->iters[iter];
  if (iv.thread != ThreadTag::kNone || iv.kind != ForKind::kSerial) {
    return Precondition(
        prim, absl::StrCat(LoopDesc(*s, iter), " is already ",
                           iv.thread != ThreadTag::kNone ? std::string(ThreadTagName(iv.thread))
                                                         : std::string(ForKindName(iv.kind))));
  }
  if (tag != ThreadTag::kVThread) {
    for (int other : s->leaves) {
      if (s->iters[other].thread == tag) {
        return Precondition(prim,
                            absl::StrCat(thread, " is already bound to ", LoopDesc(*s, other)));
      }
    }
  }
  if (iv.reduce && IsBlockTag(tag)) {
    return Invalid(prim, absl::StrCat("cannot bind reduction ", LoopDesc(*s, iter), " to ", thread,
                                      ": blocks cannot combine partial results; "
                                      "rfactor the reduction first"));
  }
  if (iv.reduce && tag == ThreadTag::kVThread) {
    return Invalid(prim, absl::StrCat("cannot bind reduction ", LoopDesc(*s, iter), " to vthread"));
  }
  if (iv.reduce) {
    for (int other : s->leaves) {
      if (other != iter && s->iters[other].reduce && IsThreadTag(s->iters[other].thread)) {
        return Precondition(
            prim, absl::StrCat("stage ", s->name, " already has a cross-thread reduction over ",
                               LoopDesc(*s, other)));
      }
    }
  }
  iv.kind = ForKind::kThreadBinding;
  iv.thread = tag;
  Record(Instruction{prim, {RVName(loop.id)}, {{"thread", thread}}, {}, {}});
  return absl::OkStatus();
}

absl::Status Schedule::MarkLoopKind(LoopRV loop, ForKind kind, const char* prim) {
  auto l = MutableLoop(loop, prim);
  if (!l.ok()) return l.status();
  auto [s, iter] = *l;
  TESSEL_RETURN_IF_ERROR(MarkLoop(s, iter, kind, prim, LoopDesc(*s, iter)));
  Record(Instruction{prim, {RVName(loop.id)}, {}, {}, {}});
  return absl::OkStatus();
}

absl::Status Schedule::Parallel(LoopRV loop) {
  return MarkLoopKind(loop, ForKind::kParallel, kParallel);
}
absl::Status Schedule::Vectorize(LoopRV loop) {
  return MarkLoopKind(loop, ForKind::kVectorized, kVectorize);
}
absl::Status Schedule::Unroll(LoopRV loop) {
  return MarkLoopKind(loop, ForKind::kUnrolled, kUnroll);
}

// ---------------------------------------------------------------------------------------------
// Instruction table entries.

namespace {

absl::Status ApplyBind(InstructionReader& in) {
  TESSEL_ASSIGN_OR_RETURN(LoopRV loop, in.Loop(0));
  TESSEL_ASSIGN_OR_RETURN(std::string thread, in.AttrString("thread"));
  return in.schedule().Bind(loop, thread);
}

}  // namespace

void RegisterLoopKindInstructions(InstructionTable* table) {
  table->Register(kBind, ApplyBind);
  table->Register(kParallel, ApplyLoopPrimitive<&Schedule::Parallel>);
  table->Register(kVectorize, ApplyLoopPrimitive<&Schedule::Vectorize>);
  table->Register(kUnroll, ApplyLoopPrimitive<&Schedule::Unroll>);
}

}  // namespace tessel::schedules
