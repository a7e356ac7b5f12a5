// Storage layout of a stage's buffer: set_scope (global, shared, local), storage_align (padded
// strides), split_buffer_axis (one axis stored as several), fuse_axes (several axes of the
// stage's domain as one, its buffer stored accordingly), pad_axis (an axis grown to a
// multiple, the stage computing zeros past its old extent) and permute_axes (the buffer's axes
// stored in another order).

#include <algorithm>
#include <functional>
#include <numeric>
#include <string>
#include <unordered_map>
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
constexpr char kFuseAxes[] = "fuse_axes";
constexpr char kSetScope[] = "set_scope";
constexpr char kPadAxis[] = "pad_axis";
constexpr char kPermuteAxes[] = "permute_axes";

// Whether the stage's loops are its root iters, untouched: unsplit, in order, serial, unbound,
// the stage itself at the root with no decomposed initialization.
bool HasRootLoops(const Stage& s) {
  bool fresh = s.relations.empty() && s.attach.kind == AttachPoint::Kind::kRoot && s.init_at < 0 &&
               static_cast<int>(s.leaves.size()) == s.num_root();
  for (int i = 0; fresh && i < s.num_root(); ++i) {
    const IterVar& iv = s.iters[i];
    fresh = s.leaves[i] == i && iv.kind == ForKind::kSerial && iv.thread == ThreadTag::kNone;
  }
  return fresh;
}

// What a change of stage `s`'s domain and buffer (fuse_axes, pad_axis, permute_axes) needs: no
// part of a tuple reduction, its root loops untouched, nothing attached to it (`attached`), not
// inlined; and, where `check_align`, no storage_align yet. The errors say to `what` first.
absl::Status CheckUntouchedForLayout(const char* prim, const Stage& s, bool attached,
                                     const char* what, bool check_align) {
  if (s.combiner || !s.computed_by.empty()) {
    return Precondition(
        prim, absl::StrCat("stage ", s.name, " is part of a tuple reduction (fuse_reductions); ",
                           what, " before fusing the reductions"));
  }
  if (!HasRootLoops(s) || attached || s.inlined()) {
    return Precondition(
        prim, absl::StrCat("stage ", s.name, " has transformed, attached or inlined loops; ", prim,
                           " must come first"));
  }
  if (check_align && !s.aligns.empty()) {
    return Precondition(prim, absl::StrCat("stage ", s.name, " is padded with storage_align; ",
                                           what, " before storage_align"));
  }
  return absl::OkStatus();
}

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
  if (!HasRootLoops(*s) || AttachedTo(s->name)) {
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

  // Readers' index e of the axis becomes e / strides[0], (e / strides[1]) % fs[1], ...,
  // e % fs.back().
  ReplaceBuffer(s->buffer, nb, [&](const std::vector<Expr>& idx) {
    std::vector<Expr> out(idx.begin(), idx.begin() + axis);
    const Expr& e = idx[axis];
    for (size_t i = 0; i < fs.size(); ++i) {
      Expr q = strides[i] == 1 ? e : e / MakeInt(strides[i], e->dtype);
      if (i > 0) q = q % MakeInt(fs[i], e->dtype);
      out.push_back(std::move(q));
    }
    out.insert(out.end(), idx.begin() + axis + 1, idx.end());
    return out;
  });
  Instruction inst{prim, {RVName(block.id)}, {{"axis", axis}}, {}, {}};
  RecordFactors(factor_args, &inst);
  Record(std::move(inst));
  return absl::OkStatus();
}

absl::Status Schedule::FuseAxes(BlockRV block, const std::vector<int>& axes) {
  const char* prim = kFuseAxes;
  auto st = MutableStage(block, prim);
  if (!st.ok()) return st.status();
  Stage* s = *st;
  const int na = static_cast<int>(s->axes.size());
  if (axes.size() < 2) {
    return Invalid(prim, absl::StrCat("needs at least two axes of stage ", s->name,
                                      " to fuse, got ", axes.size()));
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= s->num_root()) {
      return Invalid(prim, absl::StrCat("axis ", axes[i], " of stage ", s->name, " must be in [0, ",
                                        s->num_root(),
                                        "): its spatial axes, then its reduction "
                                        "axes"));
    }
    if (std::count(axes.begin(), axes.end(), axes[i]) > 1) {
      return Invalid(prim, absl::StrCat("axis ", axes[i], " of stage ", s->name,
                                        " is listed twice; list each axis once"));
    }
    if ((axes[i] < na) != (axes[0] < na)) {
      return Invalid(prim, absl::StrCat("axes [", absl::StrJoin(axes, ", "), "] of stage ", s->name,
                                        " mix spatial and reduction axes; fuse each kind apart"));
    }
  }
  const bool reduce = axes[0] >= na;
  if (!reduce && s->is_output) {
    return Precondition(
        prim, absl::StrCat("stage ", s->name, " is an output; its layout is the workload's"));
  }
  TESSEL_RETURN_IF_ERROR(CheckUntouchedForLayout(prim, *s, AttachedTo(s->name) != nullptr,
                                                 "fuse its axes", /*check_align=*/!reduce));
  std::vector<int64_t> extents, strides(axes.size(), 1);
  for (int a : axes) extents.push_back(s->iters[a].extent);
  for (int i = static_cast<int>(axes.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * extents[i + 1];
  }
  const int64_t total = strides[0] * extents[0];
  // The fused variable replaces the listed ones in the body: axis i = fused / stride_i % extent_i.
  std::vector<std::string> names;
  for (int a : axes) names.push_back(s->iters[a].var->name);
  const VarPtr fused = MakeVar(absl::StrJoin(names, "_"), s->iters[axes[0]].var->dtype);
  std::unordered_map<const VarNode*, Expr> values;
  for (size_t i = 0; i < axes.size(); ++i) {
    Expr v = strides[i] == 1 ? Expr(fused) : fused / strides[i];
    if (i > 0) v = v % extents[i];
    values[s->iters[axes[i]].var.get()] = v;
  }
  s->body = Substitute(s->body, values);
  // Root iters: the fused one in the position of the first listed, the others dropped.
  const int first = *std::min_element(axes.begin(), axes.end());
  std::vector<IterVar> iters;
  std::vector<VarPtr> spatial, reduced;
  for (int i = 0; i < s->num_root(); ++i) {
    if (std::find(axes.begin(), axes.end(), i) != axes.end() && i != first) continue;
    IterVar iv = s->iters[i];
    if (i == first) iv = IterVar{fused, total, reduce};
    (i < na ? spatial : reduced).push_back(iv.var);
    iters.push_back(std::move(iv));
  }
  BufferPtr nb;
  if (!reduce) {
    std::vector<int64_t> shape;
    for (int d = 0; d < na; ++d) {
      if (d == first) shape.push_back(total);
      if (std::find(axes.begin(), axes.end(), d) == axes.end())
        shape.push_back(s->buffer->shape[d]);
    }
    nb = MakeBuffer(s->buffer->name, s->buffer->dtype, shape, s->buffer->scope);
  }
  s->axes = std::move(spatial);
  s->reduce_axes = std::move(reduced);
  s->iters = std::move(iters);
  s->leaves.resize(s->iters.size());
  std::iota(s->leaves.begin(), s->leaves.end(), 0);
  ++s->loop_generation;
  if (nb) {
    // Readers' indices of the listed axes become one, sum of index_i * stride_i, in the position
    // of the first.
    ReplaceBuffer(s->buffer, nb, [&](const std::vector<Expr>& in) {
      Expr one;
      for (size_t i = 0; i < axes.size(); ++i) {
        const Expr& x = in[axes[i]];
        Expr term = strides[i] == 1 ? x : x * strides[i];
        one = one ? one + term : term;
      }
      std::vector<Expr> idx;
      for (int d = 0; d < static_cast<int>(in.size()); ++d) {
        if (d == first) idx.push_back(one);
        if (std::find(axes.begin(), axes.end(), d) == axes.end()) idx.push_back(in[d]);
      }
      return idx;
    });
  }
  Record(Instruction{prim, {RVName(block.id)}, {{"axes", axes}}, {}, {}});
  return absl::OkStatus();
}

absl::Status Schedule::PadAxis(BlockRV block, int axis, int64_t multiple) {
  const char* prim = kPadAxis;
  auto st = MutableStage(block, prim);
  if (!st.ok()) return st.status();
  Stage* s = *st;
  const int rank = static_cast<int>(s->axes.size());
  if (axis < 0 || axis >= rank) {
    return Invalid(prim, absl::StrCat("axis ", axis, " of stage ", s->name, " (rank ", rank,
                                      ") must be in [0, ", rank, ")"));
  }
  if (multiple < 1) {
    return Invalid(prim, absl::StrCat("the multiple to pad axis ", axis, " of stage ", s->name,
                                      " to must be at least 1, got ", multiple));
  }
  if (s->is_output) {
    return Precondition(
        prim, absl::StrCat("stage ", s->name, " is an output; its shape is the workload's"));
  }
  if (s->reduces() || s->combiner || !s->computed_by.empty()) {
    return Precondition(prim, absl::StrCat("stage ", s->name,
                                           " is a reduction; pad a stage that computes each "
                                           "element on its own (a copy)"));
  }
  TESSEL_RETURN_IF_ERROR(
      CheckUntouchedForLayout(prim, *s, AttachedTo(s->name) != nullptr, "pad its axis", true));
  const int64_t extent = s->iters[axis].extent;
  const int64_t padded = (extent + multiple - 1) / multiple * multiple;
  if (padded != extent) {
    // Readers keep their indices, all below the old extent; the new positions hold zeros.
    s->body = MakeSelect(Expr(s->axes[axis]) < extent, s->body, MakeZero(s->buffer->dtype));
    s->iters[axis].extent = padded;
    std::vector<int64_t> shape = s->buffer->shape;
    shape[axis] = padded;
    ReplaceBuffer(s->buffer,
                  MakeBuffer(s->buffer->name, s->buffer->dtype, shape, s->buffer->scope));
    ++s->loop_generation;
  }
  Record(Instruction{prim, {RVName(block.id)}, {{"axis", axis}, {"multiple", multiple}}, {}, {}});
  return absl::OkStatus();
}

absl::Status Schedule::PermuteAxes(BlockRV block, const std::vector<int>& order) {
  const char* prim = kPermuteAxes;
  auto st = MutableStage(block, prim);
  if (!st.ok()) return st.status();
  Stage* s = *st;
  const int rank = static_cast<int>(s->axes.size());
  std::vector<int> identity(rank);
  std::iota(identity.begin(), identity.end(), 0);
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  if (sorted != identity) {
    return Invalid(
        prim, absl::StrCat("order [", absl::StrJoin(order, ", "), "] of stage ", s->name,
                           " must list each of its ", rank, " axes once (0 to ", rank - 1, ")"));
  }
  if (s->is_output) {
    return Precondition(
        prim, absl::StrCat("stage ", s->name, " is an output; its layout is the workload's"));
  }
  TESSEL_RETURN_IF_ERROR(
      CheckUntouchedForLayout(prim, *s, AttachedTo(s->name) != nullptr, "permute its axes", true));
  if (order != identity) {
    // The same values over the same domain: the root loops (spatial ones first) and the
    // buffer's axes take the new order, and every read of the buffer is rewritten.
    std::vector<VarPtr> axes;
    std::vector<IterVar> iters;
    std::vector<int64_t> shape;
    for (int d : order) {
      axes.push_back(s->axes[d]);
      iters.push_back(s->iters[d]);
      shape.push_back(s->buffer->shape[d]);
    }
    for (int i = rank; i < s->num_root(); ++i) iters.push_back(s->iters[i]);
    s->axes = std::move(axes);
    s->iters = std::move(iters);
    ++s->loop_generation;
    // Readers' index i of the new buffer is their index order[i] of the old.
    ReplaceBuffer(s->buffer, MakeBuffer(s->buffer->name, s->buffer->dtype, shape, s->buffer->scope),
                  [&](const std::vector<Expr>& in) {
                    std::vector<Expr> idx;
                    for (int d : order) idx.push_back(in[d]);
                    return idx;
                  });
  }
  Record(Instruction{prim, {RVName(block.id)}, {{"order", order}}, {}, {}});
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

// The list of axis indices in attribute `attr` of instruction `kind`.
absl::StatusOr<std::vector<int>> AttrAxes(InstructionReader& in, const char* attr,
                                          const char* kind) {
  TESSEL_ASSIGN_OR_RETURN(std::vector<int64_t> axes, in.AttrIntArray(attr));
  std::vector<int> ints;
  for (int64_t a : axes) {
    if (a < 0 || a > 1 << 20) {
      return InstructionReader::Error(absl::StrCat(kind, ": axis out of range"));
    }
    ints.push_back(static_cast<int>(a));
  }
  return ints;
}

absl::Status ApplyFuseAxes(InstructionReader& in) {
  TESSEL_ASSIGN_OR_RETURN(BlockRV block, in.Block(0));
  TESSEL_ASSIGN_OR_RETURN(std::vector<int> axes, AttrAxes(in, "axes", "fuse_axes"));
  return in.schedule().FuseAxes(block, axes);
}

absl::Status ApplySplitBufferAxis(InstructionReader& in) {
  TESSEL_ASSIGN_OR_RETURN(BlockRV block, in.Block(0));
  TESSEL_ASSIGN_OR_RETURN(int axis, in.AttrInt32("axis"));
  TESSEL_ASSIGN_OR_RETURN(std::vector<Factor> factors, in.AttrFactors("factors", 1));
  return in.schedule().SplitBufferAxis(block, axis, factors);
}

absl::Status ApplyPadAxis(InstructionReader& in) {
  TESSEL_ASSIGN_OR_RETURN(BlockRV block, in.Block(0));
  TESSEL_ASSIGN_OR_RETURN(int axis, in.AttrInt32("axis"));
  TESSEL_ASSIGN_OR_RETURN(int64_t multiple, in.AttrInt("multiple"));
  return in.schedule().PadAxis(block, axis, multiple);
}

absl::Status ApplyPermuteAxes(InstructionReader& in) {
  TESSEL_ASSIGN_OR_RETURN(BlockRV block, in.Block(0));
  TESSEL_ASSIGN_OR_RETURN(std::vector<int> order, AttrAxes(in, "order", "permute_axes"));
  return in.schedule().PermuteAxes(block, order);
}

}  // namespace

void RegisterLayoutInstructions(InstructionTable* table) {
  table->Register(kStorageAlign, ApplyStorageAlign);
  table->Register(kSplitBufferAxis, ApplySplitBufferAxis);
  table->Register(kSetScope, ApplySetScope);
  table->Register(kFuseAxes, ApplyFuseAxes);
  table->Register(kPadAxis, ApplyPadAxis);
  table->Register(kPermuteAxes, ApplyPermuteAxes);
}

}  // namespace tessel::schedules
