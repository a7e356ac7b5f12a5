#include "schedules/lower/plan_vectorization.h"

#include <algorithm>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "schedules/ir/affine.h"
#include "schedules/ir/expr_functor.h"
#include "schedules/ir/substitute.h"
#include "schedules/lower/passes.h"

namespace tessel::schedules {

namespace {

// A load read as vectors, with the rest of its flat index besides the loop variable.
using LaneLoad = std::pair<Expr, AffineForm>;

// The loads of a vectorized loop's stored value that depend on the loop (lane) variable, each
// with the rest of its flat index (the lane's coefficient must be 1). They are read as vectors
// before the store, so none may sit in a select branch (which may guard it). Loads that do not
// depend on the lane, and loads of local arrays (registers, indexed with constants once
// unrolled), are printed per lane and not listed.
class LaneLoadScanner final : public ExprVisitor {
 public:
  explicit LaneLoadScanner(const VarNode* lane) : lane_(lane) {}

  // False, with the reason in `why`, when a lane-dependent load is not contiguous in the lane or
  // sits in a select branch.
  bool Scan(const Expr& value, std::string* why) {
    Visit(value);
    if (!ok_) *why = why_;
    return ok_;
  }
  const std::vector<LaneLoad>& loads() const { return loads_; }

 protected:
  void VisitLoad(const LoadNode& l, const Expr& self) override {
    if (!ok_ || !UsesVar(self, lane_) || l.buffer->scope == MemScope::kLocal) return;
    for (const auto& seen : loads_) {
      if (seen.first.get() == &l) return;
    }
    AffineForm rest;
    int64_t c = 0;
    if (in_branch_ > 0) {
      why_ = "a load that depends on the loop variable is inside a select branch";
      ok_ = false;
    } else if (!SplitAffine(FlatIndex(*l.buffer, l.indices), lane_, &c, &rest) || c != 1) {
      why_ =
          absl::StrCat("the load of ", l.buffer->name, " is not contiguous in the loop variable");
      ok_ = false;
    } else {
      loads_.emplace_back(self, std::move(rest));
    }
  }
  void VisitSelect(const SelectNode& n, const Expr&) override {
    Visit(n.cond);
    ++in_branch_;
    Visit(n.true_value);
    Visit(n.false_value);
    --in_branch_;
  }

 private:
  const VarNode* lane_;
  std::vector<LaneLoad> loads_;
  int in_branch_ = 0;
  bool ok_ = true;
  std::string why_;
};

// Whether `cond` (a conjunction) holds for all the lanes of every aligned chunk of `lanes` lanes
// of `v` or for none: each conjunct is free of `v`, or compares v + rest (rest a multiple of
// `lanes`) with a constant where a chunk cannot straddle (x < c and x >= c with c a multiple of
// `lanes`; x <= c and x > c with c + 1 one).
bool UniformOverChunks(const Expr& cond, const VarNode* v, int64_t lanes) {
  if (!UsesVar(cond, v)) return true;
  const auto* b = As<BinaryNode>(cond);
  if (b == nullptr) return false;
  if (b->op == BinaryOp::kAnd) {
    return UniformOverChunks(b->a, v, lanes) && UniformOverChunks(b->b, v, lanes);
  }
  int64_t c = 0;
  if (!IsConstInt(b->b, &c)) return false;
  if (b->op == BinaryOp::kLe || b->op == BinaryOp::kGt) {
    ++c;
  } else if (b->op != BinaryOp::kLt && b->op != BinaryOp::kGe) {
    return false;
  }
  int64_t coeff = 0;
  AffineForm rest;
  return SplitAffine(b->a, v, &coeff, &rest) && coeff == 1 && AllMultiplesOf(rest, lanes) &&
         c % lanes == 0;
}

// The widest lane count (16, 8, 4, 2) that divides `width`, has a vector type for every load's
// dtype (and the store's, when given), keeps every access aligned and every condition of
// `uniform` the same over each chunk of lanes of `v` (UniformOverChunks); 0 when none.
int64_t PickLanes(int64_t width, const AffineForm& min_form, const std::vector<LaneLoad>& loads,
                  std::optional<std::pair<DType, AffineForm>> store, const VarNode* v = nullptr,
                  const std::vector<Expr>& uniform = {}) {
  for (int64_t cand : {16, 8, 4, 2}) {
    if (width % cand != 0 || !AllMultiplesOf(min_form, cand)) continue;
    if (std::any_of(uniform.begin(), uniform.end(),
                    [&](const Expr& c) { return !UniformOverChunks(c, v, cand); })) {
      continue;
    }
    if (store && (!CudaVecType(store->first, cand) || !AllMultiplesOf(store->second, cand))) {
      continue;
    }
    bool fits = true;
    for (const auto& [l, rest] : loads) {
      if (!CudaVecType(l->dtype, cand) || !AllMultiplesOf(rest, cand)) fits = false;
    }
    if (fits) return cand;
  }
  return 0;
}

void SetLoads(const std::vector<LaneLoad>& loads, VectorLoop* plan) {
  plan->loads.clear();
  for (const auto& l : loads) plan->loads.push_back(l.first);
}

// A vectorized loop that accumulates into registers (a reduction loop made vectorized): a body
// of lets and stores to local arrays at indices free of the loop variable. Each contiguous load
// is read as vectors, and the body runs once per lane, in the loop's order, so the result is the
// scalar loop's bit for bit. Fills `plan` (kind, lanes, loads), or returns false with the reason.
bool PlanReduction(const ForNode& n, int64_t width, const Stmt& body, VectorLoop* plan,
                   std::string* why) {
  const VarNode* v = n.var.get();
  // The body: lets and stores to registers at indices free of the loop variable.
  std::vector<Expr> values;
  bool shape_ok = true;
  WalkStmt(body, [&](const Stmt& x) {
    if (!shape_ok) return;
    if (const auto* st = As<StoreNode>(x)) {
      bool lane_index = st->buffer->scope != MemScope::kLocal;
      for (const Expr& i : st->indices) lane_index = lane_index || UsesVar(i, v);
      if (lane_index) {
        *why = st->buffer->scope == MemScope::kLocal
                   ? "the store is to a local array, which stays in registers with scalar accesses"
                   : "the body stores to memory besides registers";
        shape_ok = false;
      }
      values.push_back(st->value);
    } else if (const auto* let = As<LetStmtNode>(x)) {
      values.push_back(let->value);
    } else if (x->kind != StmtKind::kSeq) {
      *why = "the body is not lets and stores to registers";
      shape_ok = false;
    }
  });
  if (!shape_ok) return false;
  LaneLoadScanner scanner(v);
  for (const Expr& e : values) {
    if (!scanner.Scan(e, why)) return false;
  }
  if (scanner.loads().empty()) {
    *why = "no load of global or shared memory depends on the loop variable";
    return false;
  }
  const int64_t lanes = PickLanes(width, ToAffine(n.min), scanner.loads(), std::nullopt);
  if (lanes == 0) {
    *why = "no vector type fits the element types, the extent and the alignment of the loads";
    return false;
  }
  plan->kind = VectorLoop::Kind::kReduction;
  plan->lanes = lanes;
  SetLoads(scanner.loads(), plan);
  return true;
}

// Whether `e` is a constant zero (integer or float).
bool IsZero(const Expr& e) {
  int64_t i = 1;
  if (IsConstInt(e, &i)) return i == 0;
  const auto* f = As<FloatImmNode>(e);
  return f != nullptr && f->value == 0.0;
}

// The plan of `n` once its guards are peeled: `body` is what they guard, `lane_guards` those
// of the guards that depend on the loop variable (vectorized only where they are the same over
// each chunk of lanes).
VectorLoop PlanGuardedBody(const ForNode& n, int64_t width, Stmt body, VectorLoop plan,
                           const std::vector<Expr>& lane_guards) {
  const VarNode* v = n.var.get();
  auto scalar = [&](std::string why) {
    plan.kind = VectorLoop::Kind::kScalar;
    plan.lanes = 0;
    plan.guards.clear();
    plan.chunk_guards.clear();
    plan.zero_unless = nullptr;
    plan.body = n.body;
    plan.loads.clear();
    plan.why = std::move(why);
    return plan;
  };
  // A copy that zero-fills where a condition fails (select(c, value, 0), a padded tile's shared
  // copy): the value is stored where c holds and zeros elsewhere, chunk by chunk.
  if (const auto* st = As<StoreNode>(body);
      st != nullptr && st->buffer->scope != MemScope::kLocal) {
    if (const auto* sel = As<SelectNode>(st->value); sel != nullptr && IsZero(sel->false_value)) {
      plan.zero_unless = sel->cond;
      body = MakeStore(st->buffer, st->indices, sel->true_value);
    }
  }
  plan.body = body;
  if (!lane_guards.empty() && !As<StoreNode>(body)) {
    return scalar("the store is guarded by a condition on the loop variable");
  }
  const auto* store = As<StoreNode>(body);
  // A store to a local array stays scalar (the array stays in registers only with scalar
  // accesses at constant indices); its operands are still read as vectors (a register cache
  // filled from global memory with 16-byte loads).
  const bool local_store = store != nullptr && store->buffer->scope == MemScope::kLocal;
  std::string why;
  if (store == nullptr || local_store) {
    if (!lane_guards.empty()) {
      return scalar("the store is guarded by a condition on the loop variable");
    }
    if (PlanReduction(n, width, body, &plan, &why)) return plan;
    if (!local_store) return scalar("the body is not a single store");
  }
  int64_t coeff = 0;
  AffineForm store_rest;
  if (!local_store &&
      (!SplitAffine(FlatIndex(*store->buffer, store->indices), v, &coeff, &store_rest) ||
       coeff != 1)) {
    return scalar("the store is not contiguous in the loop variable");
  }
  // Loads that depend on the loop variable must be contiguous too.
  LaneLoadScanner scanner(v);
  if (!scanner.Scan(store->value, &why)) return scalar(why);
  const std::vector<LaneLoad>& loads = scanner.loads();
  if (local_store && loads.empty()) return scalar(why);  // nothing to read as a vector
  const AffineForm min_form = ToAffine(n.min);
  std::vector<Expr> uniform = lane_guards;
  if (plan.zero_unless) uniform.push_back(plan.zero_unless);
  const int64_t lanes = local_store
                            ? PickLanes(width, min_form, loads, std::nullopt)
                            : PickLanes(width, min_form, loads,
                                        std::pair{store->buffer->dtype, store_rest}, v, uniform);
  if (lanes == 0) {
    // Aligned lanes would fit, but a condition differs within their chunks.
    if (!uniform.empty() &&
        PickLanes(width, min_form, loads, std::pair{store->buffer->dtype, store_rest}) > 0) {
      return scalar(lane_guards.empty()
                        ? "a load that depends on the loop variable is inside a select branch"
                        : "the store is guarded by a condition on the loop variable");
    }
    return scalar(
        "no vector type fits the element types, the extent and the alignment of the accesses");
  }
  plan.chunk_guards = lane_guards;
  plan.kind = local_store ? VectorLoop::Kind::kLaneStores : VectorLoop::Kind::kVectorStore;
  plan.lanes = lanes;
  SetLoads(loads, &plan);
  return plan;
}

}  // namespace

std::optional<CudaVectorType> CudaVecType(DType t, int64_t lanes) {
  switch (t) {
    case DType::kFloat32:
      if (lanes == 2) return CudaVectorType{"float2", true};
      if (lanes == 4) return CudaVectorType{"float4", true};
      return std::nullopt;
    case DType::kFloat64:
      if (lanes == 2) return CudaVectorType{"double2", true};
      return std::nullopt;
    case DType::kInt32:
      if (lanes == 2) return CudaVectorType{"int2", true};
      if (lanes == 4) return CudaVectorType{"int4", true};
      return std::nullopt;
    case DType::kInt64:
      if (lanes == 2) return CudaVectorType{"longlong2", true};
      return std::nullopt;
    case DType::kFloat16:
    case DType::kBFloat16:
      if (lanes == 2) return CudaVectorType{"unsigned int", false};
      if (lanes == 4) return CudaVectorType{"uint2", false};
      if (lanes == 8) return CudaVectorType{"uint4", false};
      return std::nullopt;
    case DType::kBool:
      return std::nullopt;
  }
  return std::nullopt;
}

VectorLoop PlanVectorLoop(const Stmt& loop) {
  const auto& n = static_cast<const ForNode&>(*loop);
  const VarNode* v = n.var.get();
  VectorLoop plan;
  plan.loop = loop;
  plan.body = n.body;
  int64_t width = 0;
  if (!IsConstInt(n.extent, &width) || width < 2) {
    plan.why = "the extent is not a constant of at least 2";
    return plan;
  }
  Stmt body = n.body;
  std::vector<Expr> lane_guards;
  while (const auto* ite = As<IfThenElseNode>(body)) {
    if (ite->else_case) {
      plan.guards.clear();
      plan.why = "the store is guarded by a condition on the loop variable";
      return plan;
    }
    (UsesVar(ite->cond, v) ? lane_guards : plan.guards).push_back(ite->cond);
    body = ite->then_case;
  }
  return PlanGuardedBody(n, width, body, std::move(plan), lane_guards);
}

std::vector<VectorLoop> PlanVectorization(const Kernel& kernel) {
  std::vector<VectorLoop> plans;
  std::unordered_set<const StmtNode*> seen;
  WalkStmt(kernel.body, [&](const Stmt& s) {
    const auto* f = As<ForNode>(s);
    if (f != nullptr && f->kind == ForKind::kVectorized && seen.insert(s.get()).second) {
      plans.push_back(PlanVectorLoop(s));
    }
  });
  return plans;
}

absl::Status PlanKernelsVectorization(LoweringState* state) {
  if (!state->target.is_cuda()) return absl::OkStatus();
  for (Kernel& k : state->program.kernels) k.vectors = PlanVectorization(k);
  return absl::OkStatus();
}

}  // namespace tessel::schedules
