#include "schedules/schedule/region.h"

#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "schedules/ir/expr_functor.h"
#include "schedules/ir/simplify.h"
#include "schedules/ir/substitute.h"
#include "schedules/ir/tensor_intrin.h"

namespace tessel::schedules {

int FindStageIndex(const std::vector<Stage>& stages, const std::string& name) {
  for (size_t i = 0; i < stages.size(); ++i) {
    if (stages[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

int KernelRootIndex(const std::vector<Stage>& stages, int stage) {
  int cur = stage;
  for (int depth = 0; depth < 1000 && stages[cur].attach.kind == AttachPoint::Kind::kAt; ++depth) {
    const int up = FindStageIndex(stages, stages[cur].attach.stage);
    if (up < 0) break;
    cur = up;
  }
  return cur;
}

std::vector<std::pair<int, int>> EnclosingLoops(const std::vector<Stage>& stages, int stage,
                                                int iter) {
  std::vector<std::pair<int, int>> chain;
  const Stage& s = stages[stage];
  if (s.attach.kind == AttachPoint::Kind::kAt) {
    int parent = FindStageIndex(stages, s.attach.stage);
    if (parent >= 0) chain = EnclosingLoops(stages, parent, s.attach.iter);
  }
  const int pos = s.LeafPosition(iter);
  for (int p = 0; p <= pos; ++p) chain.emplace_back(stage, s.leaves[p]);
  return chain;
}

namespace {

// A closed interval [min, max] of symbolic integer expressions.
struct Interval {
  Expr min, max;
};

// Interval evaluation: each variable is either a point (kept symbolic) or ranges over
// [0, extent - 1].
class IntervalEval {
 public:
  explicit IntervalEval(const std::unordered_map<const VarNode*, int64_t>& varying)
      : varying_(varying) {}

  std::optional<Interval> Eval(const Expr& e) {
    if (int64_t c; IsConstInt(e, &c)) return Interval{e, e};
    if (const auto* v = As<VarNode>(e)) {
      auto it = varying_.find(v);
      if (it == varying_.end()) return Interval{e, e};
      return Interval{MakeInt(0, e->dtype), MakeInt(it->second - 1, e->dtype)};
    }
    if (const auto* b = As<BinaryNode>(e)) {
      auto a = Eval(b->a);
      auto c = Eval(b->b);
      if (!a || !c) return std::nullopt;
      const bool a_point = Same(*a), c_point = Same(*c);
      if (a_point && c_point) {
        Expr p = MakeBinary(b->op, a->min, c->min);
        return Interval{p, p};
      }
      int64_t k = 0;
      switch (b->op) {
        case BinaryOp::kAdd:
          return Interval{a->min + c->min, a->max + c->max};
        case BinaryOp::kSub:
          return Interval{a->min - c->max, a->max - c->min};
        case BinaryOp::kMul:
          if (c_point && IsConstInt(c->min, &k)) return Scale(*a, k);
          if (a_point && IsConstInt(a->min, &k)) return Scale(*c, k);
          return std::nullopt;
        case BinaryOp::kDiv:
          if (c_point && IsConstInt(c->min, &k) && k > 0) {
            return Interval{a->min / k, a->max / k};
          }
          return std::nullopt;
        case BinaryOp::kMod:
          if (c_point && IsConstInt(c->min, &k) && k > 0) {
            return Interval{MakeInt(0, e->dtype), MakeInt(k - 1, e->dtype)};
          }
          return std::nullopt;
        case BinaryOp::kMin:
          return Interval{MakeMin(a->min, c->min), MakeMin(a->max, c->max)};
        case BinaryOp::kMax:
          return Interval{MakeMax(a->min, c->min), MakeMax(a->max, c->max)};
        default:
          return std::nullopt;
      }
    }
    if (const auto* s = As<SelectNode>(e)) {
      auto t = Eval(s->true_value);
      auto f = Eval(s->false_value);
      if (!t || !f) return std::nullopt;
      return Interval{MakeMin(t->min, f->min), MakeMax(t->max, f->max)};
    }
    if (const auto* u = As<UnaryNode>(e); u && u->op == UnaryOp::kNeg) {
      auto a = Eval(u->a);
      if (!a) return std::nullopt;
      return Interval{MakeUnary(UnaryOp::kNeg, a->max), MakeUnary(UnaryOp::kNeg, a->min)};
    }
    if (const auto* c = As<CastNode>(e); c && IsInt(c->dtype) && IsInt(c->value->dtype)) {
      return Eval(c->value);
    }
    return std::nullopt;
  }

 private:
  static bool Same(const Interval& i) { return i.min.get() == i.max.get(); }
  static Interval Scale(const Interval& a, int64_t k) {
    if (k >= 0) return Interval{a.min * k, a.max * k};
    return Interval{a.max * k, a.min * k};
  }
  const std::unordered_map<const VarNode*, int64_t>& varying_;
};

// Whether an expression divides or takes a remainder anywhere.
class DivModFinder : public ExprVisitor {
 public:
  static bool In(const Expr& e) {
    DivModFinder f;
    f.Visit(e);
    return f.found_;
  }

 protected:
  void VisitBinary(const BinaryNode& n, const Expr& self) override {
    if (n.op == BinaryOp::kDiv || n.op == BinaryOp::kMod) found_ = true;
    if (!found_) ExprVisitor::VisitBinary(n, self);
  }

 private:
  bool found_ = false;
};

// The interval of an index, simplified first where its raw form has no constant extent: a
// consumer's loop fused over several axes reads a row-major linearization of them, (x / 36 * 36
// + x / 6 % 6 * 6 + x % 6), that interval arithmetic bounds only loosely until it is x. Only an
// index that divides can be loose that way, so the others (most of them, on every region
// inference) skip the simplifier.
// A raw interval of constant extent can be loose too (x / 64 * 64 + x / 8 % 8 * 8 + x % 8 over 16
// consecutive x within one 64 is bounded by the whole 64), so the tighter of the two is taken.
std::optional<Interval> EvalIndex(IntervalEval& eval, const Expr& index) {
  std::optional<Interval> raw = eval.Eval(index);
  if (!DivModFinder::In(index)) return raw;
  std::optional<Interval> simplified = eval.Eval(Simplify(index));
  if (!simplified) return raw;
  if (!raw) return simplified;
  int64_t raw_extent = 0, simplified_extent = 0;
  if (!IsConstInt(Simplify(raw->max - raw->min), &raw_extent)) return simplified;
  if (IsConstInt(Simplify(simplified->max - simplified->min), &simplified_extent) &&
      simplified_extent < raw_extent) {
    return simplified;
  }
  return raw;
}

// Whether a region attached inside loop `iv` spans all of its iterations: a thread loop's, in
// memory its threads share, unless they take turns at it (kPipelineTurns: each turn's share).
bool Relaxed(MemScope scope, const IterVar& iv) {
  if (scope == MemScope::kLocal || scope == MemScope::kFragment) return false;
  if (scope == MemScope::kShared && PipelineTurns(iv.annotations) > 0) return false;
  return IsThreadTag(iv.thread) || iv.thread == ThreadTag::kVThread;
}

class Inferencer {
 public:
  explicit Inferencer(std::vector<Stage>* stages)
      : stages_(*stages), bounds_(stages->size()), state_(stages->size(), 0) {}

  absl::Status Infer(int si) {
    if (state_[si] == 2) return absl::OkStatus();
    Stage& s = stages_[si];
    if (state_[si] == 1) {
      return absl::FailedPreconditionError(
          absl::StrCat("stage ", s.name, " is attached in a cycle"));
    }
    state_[si] = 1;
    StageBound& b = bounds_[si];
    const int naxes = static_cast<int>(s.axes.size());
    b.root_min.assign(s.num_root(), MakeInt(0));
    b.root_extent.resize(s.num_root());
    for (int r = 0; r < s.num_root(); ++r) {
      b.root_extent[r] = r < naxes ? s.buffer->shape[r] : s.iters[r].extent;
    }
    if (!s.inlined() && s.attach.kind == AttachPoint::Kind::kAt) {
      const int ti = FindStageIndex(stages_, s.attach.stage);
      if (ti < 0) {
        return absl::FailedPreconditionError(
            absl::StrCat("stage ", s.name, " is attached to missing stage ", s.attach.stage));
      }
      if (absl::Status st = Infer(ti); !st.ok()) return st;
      if (stages_[ti].LeafPosition(s.attach.iter) < 0) {
        return absl::FailedPreconditionError(
            absl::StrCat("stage ", s.name, " is attached to a loop of stage ", stages_[ti].name,
                         " that was later split, fused or reset; attach after transforming"));
      }
      if (absl::Status st = InferRegion(si, ti); !st.ok()) return st;
    }
    for (int r = 0; r < naxes; ++r) s.iters[r].extent = b.root_extent[r];
    s.PropagateExtents();
    state_[si] = 2;
    return absl::OkStatus();
  }

  std::vector<StageBound> TakeBounds() { return std::move(bounds_); }

 private:
  // Global value of each root iter of stage ci: min + value from leaves.
  std::vector<Expr> GlobalRoots(int ci) {
    const Stage& c = stages_[ci];
    std::vector<Expr> v = c.IterValues();
    std::vector<Expr> g(c.num_root());
    for (int r = 0; r < c.num_root(); ++r) g[r] = bounds_[ci].root_min[r] + v[r];
    return g;
  }

  absl::Status InferRegion(int si, int ti) {
    Stage& s = stages_[si];
    const Stage& t = stages_[ti];
    const int naxes = static_cast<int>(s.axes.size());
    // Fixed loops: those enclosing the attach point, minus relaxed thread axes.
    std::unordered_set<const VarNode*> fixed;
    const MemScope scope = s.attach.reverse ? t.buffer->scope : s.buffer->scope;
    for (auto [st, it] : EnclosingLoops(stages_, ti, s.attach.iter)) {
      const IterVar& iv = stages_[st].iters[it];
      if (!Relaxed(scope, iv)) fixed.insert(iv.var.get());
    }
    // Every other leaf variable of every stage varies over its extent.
    std::unordered_map<const VarNode*, int64_t> varying;
    for (const Stage& o : stages_) {
      for (int leaf : o.leaves) {
        if (!fixed.count(o.iters[leaf].var.get())) {
          varying[o.iters[leaf].var.get()] = o.iters[leaf].extent;
        }
      }
    }
    IntervalEval eval(varying);
    std::vector<std::optional<Interval>> region(naxes);
    std::vector<bool> unknown(naxes, false);
    auto merge = [&](int d, const std::optional<Interval>& iv) {
      if (!iv) {
        unknown[d] = true;
        return;
      }
      if (!region[d]) {
        region[d] = iv;
        return;
      }
      int64_t dmin = 0, dmax = 0;
      if (!IsConstInt(Simplify(iv->min - region[d]->min), &dmin) ||
          !IsConstInt(Simplify(iv->max - region[d]->max), &dmax)) {
        unknown[d] = true;
        return;
      }
      if (dmin < 0) region[d]->min = iv->min;
      if (dmax > 0) region[d]->max = iv->max;
    };

    if (s.attach.reverse) {
      // The region the producer writes inside the loop.
      std::vector<Expr> g = GlobalRoots(ti);
      for (int d = 0; d < naxes; ++d) merge(d, eval.Eval(g[d]));
    } else {
      bool any = false;
      for (size_t ci = 0; ci < stages_.size(); ++ci) {
        const Stage& c = stages_[ci];
        if (c.inlined() || !c.computed_by.empty() || static_cast<int>(ci) == si) continue;
        const std::vector<const LoadNode*> loads = CollectLoads(c.body, s.buffer.get());
        if (loads.empty()) continue;
        if (static_cast<int>(ci) != ti) {
          // The consumer must sit inside the attach loop.
          bool inside = false;
          for (auto [st, it] : EnclosingLoops(stages_, static_cast<int>(ci),
                                              c.leaves.empty() ? -1 : c.leaves.back())) {
            if (st == ti && it == s.attach.iter) inside = true;
          }
          if (!inside && s.buffer->scope == MemScope::kGlobal &&
              KernelRootIndex(stages_, static_cast<int>(ci)) > KernelRootIndex(stages_, ti)) {
            continue;  // a later kernel reads the whole buffer (see Schedule::ComputeAt)
          }
          if (!inside) {
            return absl::FailedPreconditionError(
                absl::StrCat("stage ", s.name, " is read by stage ", c.name,
                             ", which is not inside the loop ", t.iters[s.attach.iter].var->name,
                             " of stage ", t.name, " that ", s.name, " is attached to"));
          }
          if (absl::Status st = Infer(static_cast<int>(ci)); !st.ok()) return st;
        }
        any = true;
        std::vector<Expr> g = GlobalRoots(static_cast<int>(ci));
        std::unordered_map<const VarNode*, Expr> map;
        for (size_t a = 0; a < c.axes.size(); ++a) map[c.axes[a].get()] = g[a];
        for (size_t a = 0; a < c.reduce_axes.size(); ++a) {
          map[c.reduce_axes[a].get()] = g[c.axes.size() + a];
        }
        for (const LoadNode* l : loads) {
          for (int d = 0; d < naxes; ++d) merge(d, EvalIndex(eval, Substitute(l->indices[d], map)));
        }
      }
      if (!any) {
        return absl::FailedPreconditionError(absl::StrCat("stage ", s.name, " has no consumer"));
      }
    }
    StageBound& b = bounds_[si];
    // A padded stage (kPadTile) holds its consumers' whole tile, also past its extent, from the
    // tile's own start: a tile as large as the extent but offset by a thread index (a warpgroup's
    // columns) is indexed relative to that start, so that each thread's registers stay indexed
    // by constants.
    const bool padded = s.pads_tile();
    for (int d = 0; d < naxes; ++d) {
      const int64_t dim = s.buffer->shape[d];
      int64_t extent = 0;
      if (unknown[d] || !region[d] ||
          !IsConstInt(Simplify(region[d]->max - region[d]->min + 1), &extent) ||
          (extent >= dim && !padded) || extent <= 0) {
        b.root_min[d] = MakeInt(0);
        b.root_extent[d] = dim;
      } else {
        b.root_min[d] = Simplify(region[d]->min);
        b.root_extent[d] = extent;
      }
    }
    return absl::OkStatus();
  }

  std::vector<Stage>& stages_;
  std::vector<StageBound> bounds_;
  std::vector<int> state_;
};

}  // namespace

absl::StatusOr<std::vector<StageBound>> InferBounds(std::vector<Stage>* stages) {
  Inferencer inf(stages);
  for (size_t i = 0; i < stages->size(); ++i) {
    if ((*stages)[i].inlined()) continue;
    if (absl::Status st = inf.Infer(static_cast<int>(i)); !st.ok()) return st;
  }
  return inf.TakeBounds();
}

absl::StatusOr<std::vector<int64_t>> InferRootExtents(const std::vector<Stage>& stages, int index) {
  std::vector<Stage> copy = stages;
  Inferencer inf(&copy);
  if (absl::Status st = inf.Infer(index); !st.ok()) return st;
  return inf.TakeBounds()[index].root_extent;
}

}  // namespace tessel::schedules
