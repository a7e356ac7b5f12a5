// Storage layout of a stage's buffer: set_scope (global, shared, local), storage_align (padded
// strides) and split_buffer_axis (one axis stored as several).

#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "schedules/ir/expr_functor.h"
#include "schedules/ir/substitute.h"
#include "schedules/schedule/instruction_table.h"
#include "schedules/schedule/primitive/common.h"
#include "schedules/schedule/primitive/register.h"
#include "schedules/schedule/schedule.h"
#include "schedules/util/status_macros.h"

namespace tessel::schedules {

namespace {

constexpr char kStorageAlign[] = "storage_align";
constexpr char kSplitBufferAxis[] = "split_buffer_axis";
constexpr char kSetScope[] = "set_scope";

// Rewrites loads of `from` into loads of `to` whose axis `axis` is split by `strides`/`factors`
// (split_buffer_axis): index e becomes e / strides[0], (e / strides[1]) % factors[1], ...,
// e % factors.back().
class AxisSplitter : public ExprMutator {
 public:
  AxisSplitter(const Buffer* from, BufferPtr to, int axis, const std::vector<int64_t>& factors,
               const std::vector<int64_t>& strides)
      : from_(from), to_(std::move(to)), axis_(axis), factors_(factors), strides_(strides) {}

  std::vector<Expr> Split(const std::vector<Expr>& idx) const {
    std::vector<Expr> out(idx.begin(), idx.begin() + axis_);
    const Expr& e = idx[axis_];
    for (size_t i = 0; i < factors_.size(); ++i) {
      Expr q = strides_[i] == 1 ? e : e / MakeInt(strides_[i], e->dtype);
      if (i > 0) q = q % MakeInt(factors_[i], e->dtype);
      out.push_back(std::move(q));
    }
    out.insert(out.end(), idx.begin() + axis_ + 1, idx.end());
    return out;
  }

 protected:
  Expr VisitLoad(const LoadNode& n, const Expr& self) override {
    Expr e = ExprMutator::VisitLoad(n, self);
    const auto* l = As<LoadNode>(e);
    if (l->buffer.get() != from_) return e;
    return MakeLoad(to_, Split(l->indices));
  }

 private:
  const Buffer* from_;
  BufferPtr to_;
  int axis_;
  const std::vector<int64_t>& factors_;
  const std::vector<int64_t>& strides_;
};

}  // namespace

absl::Status Schedule::SetScope(BlockRV block, const std::string& scope) {
  const char* prim = kSetScope;
  auto st = MutableStage(block, prim);
  if (!st.ok()) return st.status();
  Stage* s = *st;
  MemScope ms;
  if (!ParseMemScope(scope, &ms)) {
    return Invalid(
        prim, absl::StrCat("unknown scope '", scope, "'; use global, shared, local or fragment"));
  }
  if (s->is_output && ms != MemScope::kGlobal) {
    return Precondition(
        prim, absl::StrCat("stage ", s->name, " is an output and must stay in global memory"));
  }
  BufferPtr nb =
      MakeBuffer(s->buffer->name, s->buffer->dtype, s->buffer->shape, ms, s->buffer->strides);
  ReplaceBuffer(s->buffer, nb);
  Record(Instruction{prim, {RVName(block.id)}, {{"scope", scope}}, {}, {}});
  return absl::OkStatus();
}

absl::Status Schedule::StorageAlign(BlockRV block, int axis, int64_t factor, int64_t offset) {
  const char* prim = kStorageAlign;
  auto st = MutableStage(block, prim);
  if (!st.ok()) return st.status();
  Stage* s = *st;
  const int rank = static_cast<int>(s->buffer->shape.size());
  if (axis < 0 || axis >= rank - 1) {
    return Invalid(prim, absl::StrCat("axis ", axis, " of stage ", s->name, " (rank ", rank,
                                      ") must be an outer axis in [0, ", rank - 1,
                                      "): the innermost stride is always 1"));
  }
  if (factor <= 0 || offset < 0 || offset >= factor) {
    return Invalid(prim, absl::StrCat("needs factor > 0 and 0 <= offset < factor, got factor ",
                                      factor, " offset ", offset));
  }
  if (s->buffer->scope == MemScope::kGlobal) {
    return Precondition(prim, absl::StrCat("stage ", s->name,
                                           " is in global memory; storage_align pads buffers the "
                                           "kernel allocates (shared, local)"));
  }
  s->aligns.push_back(schedules::StorageAlign{axis, factor, offset});
  Record(Instruction{
      prim, {RVName(block.id)}, {{"axis", axis}, {"factor", factor}, {"offset", offset}}, {}, {}});
  return absl::OkStatus();
}

absl::Status Schedule::SplitBufferAxis(BlockRV block, int axis,
                                       const std::vector<Factor>& factor_args) {
  const char* prim = kSplitBufferAxis;
  auto st = MutableStage(block, prim);
  if (!st.ok()) return st.status();
  Stage* s = *st;
  const int rank = static_cast<int>(s->buffer->shape.size());
  if (axis < 0 || axis >= rank) {
    return Invalid(prim, absl::StrCat("axis ", axis, " of stage ", s->name, " (rank ", rank,
                                      ") must be in [0, ", rank, ")"));
  }
  const int64_t dim = s->buffer->shape[axis];
  std::vector<int64_t> factors;
  for (const Factor& f : factor_args) factors.push_back(f.rv.id >= 0 ? Value(f.rv) : f.value);
  if (factors.size() < 2) {
    return Invalid(prim, absl::StrCat("needs at least two factors to split axis ", axis,
                                      " of stage ", s->name, ", got ", factors.size()));
  }
  std::vector<int64_t> fs = factors;
  int inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < fs.size(); ++i) {
    if (fs[i] == -1 && inferred < 0) {
      inferred = static_cast<int>(i);
    } else if (fs[i] <= 0) {
      return Invalid(prim, absl::StrCat("factors [", absl::StrJoin(factors, ", "),
                                        "] must be positive; at most one may be -1 (inferred)"));
    } else {
      known *= fs[i];
    }
  }
  if (inferred >= 0) fs[inferred] = dim % known == 0 ? dim / known : 0;
  const int64_t product =
      std::accumulate(fs.begin(), fs.end(), int64_t{1}, std::multiplies<int64_t>());
  if (product != dim) {
    return Invalid(
        prim, absl::StrCat("factors [", absl::StrJoin(factors, ", "),
                           "] do not multiply to the extent ", dim, " of axis ", axis, " of stage ",
                           s->name, "; give factors whose product is ", dim));
  }
  if (s->is_output) {
    return Precondition(
        prim, absl::StrCat("stage ", s->name, " is an output; its layout is the workload's"));
  }
  if (s->combiner) {
    return Precondition(prim, absl::StrCat("stage ", s->name,
                                           " is part of a tuple reduction (fuse_reductions); "
                                           "split its axis before fusing"));
  }
  bool fresh = s->relations.empty() && s->attach.kind == AttachPoint::Kind::kRoot &&
               s->init_at < 0 && static_cast<int>(s->leaves.size()) == s->num_root();
  for (int i = 0; fresh && i < s->num_root(); ++i) {
    const IterVar& iv = s->iters[i];
    fresh = s->leaves[i] == i && iv.kind == ForKind::kSerial && iv.thread == ThreadTag::kNone;
  }
  for (const Stage& o : stages_) {
    if (o.attach.kind == AttachPoint::Kind::kAt && o.attach.stage == s->name) fresh = false;
  }
  if (!fresh) {
    return Precondition(prim, absl::StrCat("stage ", s->name,
                                           " has transformed or attached loops; "
                                           "split_buffer_axis must come before its loops are "
                                           "transformed and before compute_at"));
  }
  if (!s->aligns.empty()) {
    return Precondition(prim, absl::StrCat("stage ", s->name,
                                           " is padded with storage_align; split its axis "
                                           "before storage_align"));
  }
  std::vector<int64_t> strides(fs.size(), 1);
  for (int i = static_cast<int>(fs.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * fs[i + 1];

  // The new axes replace the old one in the body: old = sum of new_i * stride_i.
  const VarPtr old = s->axes[axis];
  std::vector<VarPtr> parts;
  Expr value;
  for (size_t i = 0; i < fs.size(); ++i) {
    parts.push_back(MakeVar(absl::StrCat(old->name, "_", i), old->dtype));
    Expr term = strides[i] == 1 ? Expr(parts.back()) : parts.back() * strides[i];
    value = value ? value + term : term;
  }
  s->body = Substitute(s->body, {{old.get(), value}});
  std::vector<int64_t> shape = s->buffer->shape;
  shape.erase(shape.begin() + axis);
  shape.insert(shape.begin() + axis, fs.begin(), fs.end());
  BufferPtr nb = MakeBuffer(s->buffer->name, s->buffer->dtype, shape, s->buffer->scope);
  std::vector<IterVar> iters;
  for (int i = 0; i < s->num_root(); ++i) {
    if (i != axis) {
      iters.push_back(s->iters[i]);
      continue;
    }
    for (size_t p = 0; p < fs.size(); ++p) iters.push_back(IterVar{parts[p], fs[p]});
  }
  s->axes.erase(s->axes.begin() + axis);
  s->axes.insert(s->axes.begin() + axis, parts.begin(), parts.end());
  s->iters = std::move(iters);
  s->leaves.resize(s->iters.size());
  std::iota(s->leaves.begin(), s->leaves.end(), 0);
  ++s->loop_generation;

  AxisSplitter split(s->buffer.get(), nb, axis, fs, strides);
  for (Stage& o : stages_) o.body = split.Visit(o.body);
  s->buffer = nb;
  Instruction inst{prim, {RVName(block.id)}, {{"axis", axis}}, {}, {}};
  RecordFactors(factor_args, &inst);
  Record(std::move(inst));
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Instruction table entries.

namespace {

absl::Status ApplySetScope(InstructionReader& in) {
  TESSEL_ASSIGN_OR_RETURN(BlockRV block, in.Block(0));
  TESSEL_ASSIGN_OR_RETURN(std::string scope, in.AttrString("scope"));
  return in.schedule().SetScope(block, scope);
}

absl::Status ApplyStorageAlign(InstructionReader& in) {
  TESSEL_ASSIGN_OR_RETURN(BlockRV block, in.Block(0));
  TESSEL_ASSIGN_OR_RETURN(int axis, in.AttrInt32("axis"));
  TESSEL_ASSIGN_OR_RETURN(int64_t factor, in.AttrInt("factor"));
  TESSEL_ASSIGN_OR_RETURN(int64_t offset, in.AttrInt("offset"));
  return in.schedule().StorageAlign(block, axis, factor, offset);
}

absl::Status ApplySplitBufferAxis(InstructionReader& in) {
  TESSEL_ASSIGN_OR_RETURN(BlockRV block, in.Block(0));
  TESSEL_ASSIGN_OR_RETURN(int axis, in.AttrInt32("axis"));
  TESSEL_ASSIGN_OR_RETURN(std::vector<Factor> factors, in.AttrFactors("factors", 1));
  return in.schedule().SplitBufferAxis(block, axis, factors);
}

}  // namespace

void RegisterLayoutInstructions(InstructionTable* table) {
  table->Register(kStorageAlign, ApplyStorageAlign);
  table->Register(kSplitBufferAxis, ApplySplitBufferAxis);
  table->Register(kSetScope, ApplySetScope);
}

}  // namespace tessel::schedules
