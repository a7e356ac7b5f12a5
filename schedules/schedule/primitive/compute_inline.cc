// compute_inline and reverse_compute_inline: substitute an injective stage's body into its
// consumers, or an injective consumer into its producer.

#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "schedules/ir/expr_functor.h"
#include "schedules/ir/substitute.h"
#include "schedules/schedule/instruction_table.h"
#include "schedules/schedule/primitive/common.h"
#include "schedules/schedule/primitive/register.h"
#include "schedules/schedule/schedule.h"
#include "schedules/util/status_macros.h"

namespace tessel::schedules {

namespace {

constexpr char kComputeInline[] = "compute_inline";
constexpr char kReverseComputeInline[] = "reverse_compute_inline";

// Replaces loads of `buffer` by the producer's body with its axes bound to the load's indices.
class Inliner : public ExprMutator {
 public:
  Inliner(const Buffer* buffer, const std::vector<VarPtr>& axes, Expr body)
      : buffer_(buffer), axes_(axes), body_(std::move(body)) {}

 protected:
  Expr VisitLoad(const LoadNode& n, const Expr& self) override {
    Expr e = ExprMutator::VisitLoad(n, self);
    const auto* l = As<LoadNode>(e);
    if (l->buffer.get() != buffer_) return e;
    std::unordered_map<const VarNode*, Expr> map;
    for (size_t i = 0; i < axes_.size(); ++i) map[axes_[i].get()] = l->indices[i];
    return Substitute(body_, map);
  }

 private:
  const Buffer* buffer_;
  const std::vector<VarPtr>& axes_;
  Expr body_;
};

}  // namespace

absl::Status Schedule::ComputeInline(BlockRV block) {
  const char* prim = kComputeInline;
  auto st = MutableStage(block, prim);
  if (!st.ok()) return st.status();
  Stage* s = *st;
  if (s->reduces()) {
    return Precondition(prim, absl::StrCat("stage ", s->name,
                                           " is a reduction; only injective stages can be "
                                           "inlined"));
  }
  if (s->is_output) {
    return Precondition(prim, absl::StrCat("stage ", s->name,
                                           " is an output of the workload; "
                                           "outputs must be stored"));
  }
  if (const Stage* o = AttachedTo(s->name)) {
    return Precondition(prim, absl::StrCat("stage ", o->name, " is attached to a loop of ", s->name,
                                           "; move it before inlining ", s->name));
  }
  std::vector<int> consumers = Consumers(s->buffer.get());
  if (consumers.empty()) {
    return Precondition(prim, absl::StrCat("stage ", s->name, " has no consumer to inline into"));
  }
  Inliner inl(s->buffer.get(), s->axes, s->body);
  for (int c : consumers) stages_[c].body = inl.Visit(stages_[c].body);
  s->attach = AttachPoint{AttachPoint::Kind::kInline, "", -1, false};
  Record(Instruction{prim, {RVName(block.id)}, {}, {}, {}});
  return absl::OkStatus();
}

absl::Status Schedule::ReverseComputeInline(BlockRV block) {
  const char* prim = kReverseComputeInline;
  auto st = MutableStage(block, prim);
  if (!st.ok()) return st.status();
  Stage* s = *st;
  if (s->reduces()) {
    return Precondition(prim, absl::StrCat("stage ", s->name,
                                           " is a reduction; only injective consumers can be "
                                           "inlined into their producer"));
  }
  // The producer: the one computed (non-input) stage that s reads at identity indices.
  Stage* p = nullptr;
  for (Stage& cand : stages_) {
    if (&cand == s || cand.inlined()) continue;
    if (Reads(*s, cand.buffer.get())) {
      if (p) {
        return Precondition(
            prim, absl::StrCat("stage ", s->name, " reads two computed stages (", p->name, " and ",
                               cand.name, "); it can be inlined into one producer only"));
      }
      p = &cand;
    }
  }
  if (!p) {
    return Precondition(
        prim, absl::StrCat("stage ", s->name, " reads no computed stage to be inlined into"));
  }
  if (p->reduces()) {
    return Precondition(prim, absl::StrCat("producer ", p->name, " of stage ", s->name,
                                           " is a reduction; cache_write it first and inline into "
                                           "the write-back stage"));
  }
  if (!ReadsAtIdentity(*s, p->buffer.get()) || s->axes.size() != p->axes.size() ||
      s->buffer->shape != p->buffer->shape) {
    return Precondition(prim, absl::StrCat("stage ", s->name, " must read ", p->name,
                                           " at its own indices, with the same shape"));
  }
  if (Consumers(p->buffer.get()).size() != 1) {
    return Precondition(prim,
                        absl::StrCat("producer ", p->name, " has other consumers than ", s->name));
  }
  if (const Stage* o = AttachedTo(s->name)) {
    return Precondition(prim, absl::StrCat("stage ", o->name, " is attached to a loop of ", s->name,
                                           "; move it before inlining ", s->name));
  }
  if (p->is_output) {
    return Precondition(prim, absl::StrCat("producer ", p->name, " is an output"));
  }
  // The merged stage stores s's values. Where s lives in global memory (an output always does),
  // a producer in shared/local memory would take s's values there with it.
  if (s->buffer->scope == MemScope::kGlobal && p->buffer->scope != MemScope::kGlobal) {
    return Precondition(
        prim, absl::StrCat("producer ", p->name, " is in ", MemScopeName(p->buffer->scope),
                           " memory; ", s->is_output ? "the output " : "stage ", s->name,
                           " must stay in global memory (set_scope ", p->name,
                           " global first, or do not inline ", s->name, ")"));
  }
  // p now computes s: s's body with s's axes renamed to p's and p's value substituted.
  std::unordered_map<const VarNode*, Expr> rename;
  for (size_t i = 0; i < s->axes.size(); ++i) rename[s->axes[i].get()] = p->axes[i];
  Expr body = Substitute(s->body, rename);
  Inliner inl(p->buffer.get(), p->axes, p->body);
  p->body = inl.Visit(body);
  BufferPtr old = p->buffer;
  p->buffer =
      MakeBuffer(s->buffer->name, s->buffer->dtype, s->buffer->shape, old->scope, old->strides);
  p->is_output = s->is_output;
  BufferPtr out_buffer = s->buffer;
  s->attach = AttachPoint{AttachPoint::Kind::kInline, "", -1, false};
  // Keep the workload's buffer object for outputs so that later stages and lowering agree.
  if (old->scope == out_buffer->scope) p->buffer = out_buffer;
  ReplaceBuffer(out_buffer, p->buffer);
  Record(Instruction{prim, {RVName(block.id)}, {}, {}, {}});
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Instruction table entries.

void RegisterComputeInlineInstructions(InstructionTable* table) {
  table->Register(kComputeInline, ApplyBlockPrimitive<&Schedule::ComputeInline>);
  table->Register(kReverseComputeInline, ApplyBlockPrimitive<&Schedule::ReverseComputeInline>);
}

}  // namespace tessel::schedules
