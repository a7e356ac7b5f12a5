// Tensorize: a loop nest of a stage replaced by a tensor-core intrinsic (ir/tensor_intrin.h).
// The primitive checks what the schedule knows (the loops' extents and kinds, the stage's
// computation, dtypes and scopes) and marks the loop; the lowering pass lower_tensor_intrinsics
// matches the lowered nest's accesses and emits the intrinsic.

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "schedules/ir/substitute.h"
#include "schedules/ir/tensor_intrin.h"
#include "schedules/schedule/instruction_table.h"
#include "schedules/schedule/primitive/common.h"
#include "schedules/schedule/primitive/register.h"
#include "schedules/schedule/schedule.h"
#include "schedules/util/status_macros.h"

namespace tessel::schedules {

namespace {

constexpr char kTensorize[] = "tensorize";

// mma and wgmma: the stage sums products of two 16-bit operands in `operands` memory into a
// fragment of one of `acc_types` (`unit`: "mma", "wgmma", for messages).
absl::Status CheckMatrixProductStage(const Stage& s, const std::string& intrin, const char* unit,
                                     MemScope operands, const std::vector<DType>& acc_types) {
  const std::string what = absl::StrCat("stage ", s.name);
  if (!s.reduce || *s.reduce != ReduceOp::kSum) {
    return Precondition(kTensorize, absl::StrCat(what, " is not a sum reduction; ", intrin,
                                                 " computes acc += A * B"));
  }
  if (s.buffer->scope != MemScope::kFragment) {
    return Precondition(
        kTensorize, absl::StrCat(what, " writes ", MemScopeName(s.buffer->scope), " memory; ", unit,
                                 " accumulates in a fragment: cache_write the stage to "
                                 "\"fragment\" and tensorize that stage"));
  }
  if (std::find(acc_types.begin(), acc_types.end(), s.buffer->dtype) == acc_types.end()) {
    std::vector<std::string> names;
    for (DType t : acc_types) names.push_back(DTypeName(t));
    return Precondition(
        kTensorize, absl::StrCat(what, " accumulates in ", DTypeName(s.buffer->dtype), "; ", unit,
                                 " accumulates in ", absl::StrJoin(names, " or ")));
  }
  const auto* mul = As<BinaryNode>(s.body);
  const LoadNode* a = mul && mul->op == BinaryOp::kMul ? LoadUnderCast(mul->a) : nullptr;
  const LoadNode* b = mul && mul->op == BinaryOp::kMul ? LoadUnderCast(mul->b) : nullptr;
  if (!a || !b) {
    return Precondition(kTensorize, absl::StrCat(what, " computes ", ToString(s.body), "; ", intrin,
                                                 " needs a product of two loads"));
  }
  for (const LoadNode* l : {a, b}) {
    if (l->buffer->scope != operands) {
      return Precondition(
          kTensorize, absl::StrCat(what, " reads operand ", l->buffer->name, " from ",
                                   MemScopeName(l->buffer->scope), " memory; cache_read it to \"",
                                   MemScopeName(operands), "\" first"));
    }
    if (!IsMmaOperandType(l->buffer->dtype) || l->buffer->dtype != a->buffer->dtype) {
      return Precondition(
          kTensorize,
          absl::StrCat(what, " reads ", a->buffer->name, " (", DTypeName(a->buffer->dtype),
                       ") and ", b->buffer->name, " (", DTypeName(b->buffer->dtype), "); ", intrin,
                       " multiplies two f16 or two bf16 operands"));
    }
  }
  return absl::OkStatus();
}

// ldmatrix: the stage copies a 16-bit shared buffer into a fragment.
absl::Status CheckLdmatrixStage(const Stage& s) {
  const std::string what = absl::StrCat("stage ", s.name);
  const LoadNode* src = As<LoadNode>(s.body);
  if (s.buffer->scope != MemScope::kFragment || !src || src->buffer->scope != MemScope::kShared ||
      s.reduces()) {
    return Precondition(kTensorize,
                        absl::StrCat(what,
                                     " is not a copy from shared memory into a fragment; "
                                     "ldmatrix loads a fragment (cache_read \"fragment\") "
                                     "of a shared copy (cache_read \"shared\")"));
  }
  if (!IsMmaOperandType(s.buffer->dtype)) {
    return Precondition(kTensorize, absl::StrCat(what, " holds ", DTypeName(s.buffer->dtype),
                                                 "; ldmatrix loads f16 or bf16 fragments"));
  }
  return absl::OkStatus();
}

// mma_accumulator: the stage reads or writes a fragment element by element.
absl::Status CheckAccumulatorStage(const Stage& s) {
  bool touches = s.buffer->scope == MemScope::kFragment;
  for (const LoadNode* l : CollectLoads(s.body)) touches |= l->buffer->scope == MemScope::kFragment;
  if (!touches) {
    return Precondition(kTensorize,
                        absl::StrCat("stage ", s.name,
                                     " neither reads nor writes a fragment; mma_accumulator "
                                     "distributes accesses of an accumulator over the lanes"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Schedule::Tensorize(LoopRV loop, const std::string& intrin) {
  const TensorIntrinInfo* info = FindTensorIntrin(intrin);
  if (!info) {
    return Invalid(kTensorize, absl::StrCat("unknown intrinsic '", intrin, "'; use one of ",
                                            TensorIntrinNames()));
  }
  TESSEL_ASSIGN_OR_RETURN(auto l, MutableLoop(loop, kTensorize));
  auto [s, iter] = l;
  const int p = s->LeafPosition(iter);
  const size_t n = info->forms[0].size();
  std::vector<int64_t> extents;
  for (size_t i = 0; i < n && p + i < s->leaves.size(); ++i) {
    const IterVar& iv = s->iters[s->leaves[p + i]];
    extents.push_back(iv.extent);
    const std::string desc = LoopDesc(*s, s->leaves[p + i]);
    if (iv.thread != ThreadTag::kNone ||
        (iv.kind != ForKind::kSerial && iv.kind != ForKind::kUnrolled)) {
      return Precondition(kTensorize,
                          absl::StrCat(desc, " is ",
                                       iv.thread != ThreadTag::kNone ? ThreadTagName(iv.thread)
                                                                     : ForKindName(iv.kind),
                                       "; the loops of an intrinsic stay serial"));
    }
    if (TensorizedBy(iv.annotations)) {
      return Precondition(kTensorize, absl::StrCat(desc, " is already tensorized"));
    }
    // mma: m and n spatial, k a reduction; the others all spatial.
    const bool want_reduce =
        (info->kind == TensorIntrin::kMma || info->kind == TensorIntrin::kWgmma) && i == 2;
    if (iv.reduce != want_reduce) {
      return Precondition(
          kTensorize,
          absl::StrCat(desc, " is a ", iv.reduce ? "reduction" : "spatial", " loop; ", intrin,
                       " needs ", want_reduce ? "a reduction" : "a spatial", " loop there"));
    }
  }
  bool matches = false;
  for (const std::vector<int64_t>& form : info->forms) matches |= form == extents;
  if (!matches) {
    std::vector<std::string> forms;
    if (info->kind == TensorIntrin::kWgmma) {
      forms.push_back("16 x N x 16 (N = 8, 16, ..., 256)");
    } else if (info->kind == TensorIntrin::kAccumulator) {
      forms.push_back("16 x N (N = 8, 16, ..., 256)");
    } else {
      for (const auto& f : info->forms) forms.push_back(absl::StrJoin(f, " x "));
    }
    return Precondition(
        kTensorize,
        absl::StrCat(LoopDesc(*s, iter), " and the ", n - 1, " loops inside it have extents ",
                     extents.empty() ? "none" : absl::StrJoin(extents, " x "), "; ", intrin,
                     " replaces loops of ", absl::StrJoin(forms, " or "),
                     ": split them to those extents and make them the innermost loops"));
  }
  switch (info->kind) {
    case TensorIntrin::kMma:
      TESSEL_RETURN_IF_ERROR(CheckMatrixProductStage(*s, intrin, "mma", MemScope::kFragment,
                                                     {DType::kFloat32, DType::kFloat16}));
      break;
    case TensorIntrin::kLdmatrix:
      TESSEL_RETURN_IF_ERROR(CheckLdmatrixStage(*s));
      break;
    case TensorIntrin::kAccumulator:
      TESSEL_RETURN_IF_ERROR(CheckAccumulatorStage(*s));
      break;
    case TensorIntrin::kWgmma:
      TESSEL_RETURN_IF_ERROR(
          CheckMatrixProductStage(*s, intrin, "wgmma", MemScope::kShared, {DType::kFloat32}));
      break;
  }
  s->iters[iter].annotations.emplace_back(TensorizeAnnotation(*info), 1);
  Record(Instruction{kTensorize, {RVName(loop.id)}, {{"intrin", intrin}}, {}, {}});
  return absl::OkStatus();
}

namespace {

absl::Status ApplyTensorize(InstructionReader& in) {
  TESSEL_ASSIGN_OR_RETURN(std::string intrin, in.AttrString("intrin"));
  TESSEL_ASSIGN_OR_RETURN(LoopRV loop, in.Loop(0));
  return in.schedule().Tensorize(loop, intrin);
}

}  // namespace

void RegisterTensorizeInstructions(InstructionTable* table) {
  table->Register(kTensorize, ApplyTensorize);
}

}  // namespace tessel::schedules
