#include "schedules/ir/combiner.h"

#include <limits>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "schedules/ir/expr_functor.h"
#include "schedules/ir/simplify.h"
#include "schedules/ir/substitute.h"

namespace tessel::schedules {

namespace {

// Folds x * 1, 1 * x, x + 0, 0 + x and x - 0 over floats (exact, but for the sign of a zero).
class FoldUnits : public ExprMutator {
 protected:
  Expr VisitBinary(const BinaryNode& n, const Expr& self) override {
    Expr a = Visit(n.a), b = Visit(n.b);
    if (IsFloat(n.dtype)) {
      auto is = [](const Expr& e, double v) {
        const auto* f = As<FloatImmNode>(e);
        return f != nullptr && f->value == v;
      };
      if (n.op == BinaryOp::kMul && is(b, 1)) return a;
      if (n.op == BinaryOp::kMul && is(a, 1)) return b;
      if ((n.op == BinaryOp::kAdd || n.op == BinaryOp::kSub) && is(b, 0)) return a;
      if (n.op == BinaryOp::kAdd && is(a, 0)) return b;
    }
    if (a == n.a && b == n.b) return self;
    return MakeBinary(n.op, a, b);
  }
};

std::vector<VarPtr> Vars(const std::string& prefix, const std::vector<std::string>& names,
                         DType t) {
  std::vector<VarPtr> out;
  for (const std::string& n : names) out.push_back(MakeVar(prefix + n, t));
  return out;
}

// Each component's known constant where `known` has one, else its variable of `vars`.
std::vector<Expr> KnownOr(const std::vector<Expr>& known, const std::vector<VarPtr>& vars) {
  std::vector<Expr> out;
  for (size_t i = 0; i < vars.size(); ++i) out.push_back(known[i] ? known[i] : Expr(vars[i]));
  return out;
}

Combiner Base(std::string name, const std::vector<std::string>& components, DType t) {
  Combiner c;
  c.name = std::move(name);
  c.lhs = Vars("", components, t);
  for (const std::string& n : components) c.rhs.push_back(MakeVar(n + "_2", t));
  return c;
}

}  // namespace

CombinerPtr ReduceCombiner(ReduceOp op, DType t) {
  Combiner c = Base(ReduceOpName(op), {"a"}, t);
  c.combine = {ReduceCombine(op, c.lhs[0], c.rhs[0])};
  c.identity = {ReduceIdentity(op, t)};
  c.op = op;
  return std::make_shared<const Combiner>(std::move(c));
}

CombinerPtr ComponentwiseCombiner(const std::vector<std::pair<ReduceOp, DType>>& ops) {
  if (ops.size() == 1) return ReduceCombiner(ops[0].first, ops[0].second);
  Combiner c;
  std::vector<std::string> names;
  for (size_t i = 0; i < ops.size(); ++i) {
    const auto [op, t] = ops[i];
    names.push_back(ReduceOpName(op));
    c.lhs.push_back(MakeVar(absl::StrCat("a", i), t));
    c.rhs.push_back(MakeVar(absl::StrCat("b", i), t));
    c.combine.push_back(ReduceCombine(op, c.lhs.back(), c.rhs.back()));
    c.identity.push_back(ReduceIdentity(op, t));
  }
  c.name = absl::StrCat("tuple(", absl::StrJoin(names, ", "), ")");
  return std::make_shared<const Combiner>(std::move(c));
}

CombinerPtr OnlineSoftmaxCombiner(DType t) {
  Combiner c = Base("online_softmax", {"m", "s"}, t);
  const Expr ma = c.lhs[0], sa = c.lhs[1], mb = c.rhs[0], sb = c.rhs[1];
  const Expr zero = MakeFloat(0, t);
  // d = mb - ma (0 when equal, so that two empty tuples (-inf, 0) give (-inf, 0), not NaN);
  // the smaller side is scaled by exp(-|d|): one exponential a combination.
  VarPtr d = MakeVar("d", t), e = MakeVar("e", t);
  c.lets = {{d, MakeSelect(MakeBinary(BinaryOp::kEq, mb, ma), zero, mb - ma)},
            {e, MakeCall("exp", {MakeMin(d, MakeUnary(UnaryOp::kNeg, d))}, t)}};
  c.combine = {MakeMax(ma, mb), MakeSelect(MakeBinary(BinaryOp::kGt, d, zero), sa * Expr(e) + sb,
                                           sa + sb * Expr(e))};
  c.identity = {MakeFloat(-std::numeric_limits<double>::infinity(), t), zero};
  // Two passes: the maximum, then the sum of the elements rescaled to it.
  VarPtr m = MakeVar("m", t), s = MakeVar("s", t);
  // An element equal to the maximum adds its s as it is: exp(-inf - -inf) would be NaN for the
  // identity (-inf, 0), which padding and empty partials hold.
  c.steps = {
      {m, ReduceOp::kMax, mb},
      {s, ReduceOp::kSum,
       MakeSelect(MakeBinary(BinaryOp::kEq, mb, m), sb, sb * MakeCall("exp", {mb - Expr(m)}, t))}};
  c.from_steps = {m, s};
  return std::make_shared<const Combiner>(std::move(c));
}

CombinerPtr WelfordCombiner(DType t) {
  Combiner c = Base("welford", {"n", "mean", "m2"}, t);
  const Expr na = c.lhs[0], ma = c.lhs[1], qa = c.lhs[2];
  const Expr nb = c.rhs[0], mb = c.rhs[1], qb = c.rhs[2];
  const Expr zero = MakeFloat(0, t);
  auto positive = [&](const Expr& x) { return MakeBinary(BinaryOp::kGt, x, zero); };
  // n = na + nb, mean = ma + d nb / n, m2 = qa + qb + d^2 na nb / n with d = mb - ma.
  VarPtr n = MakeVar("n", t), d = MakeVar("d", t), w = MakeVar("w", t);
  c.lets = {{n, na + nb}, {d, mb - ma}, {w, MakeSelect(positive(n), nb / Expr(n), zero)}};
  c.combine = {n, ma + Expr(d) * Expr(w), qa + qb + Expr(d) * Expr(d) * na * Expr(w)};
  c.identity = {zero, zero, zero};
  // Two passes: the count and the sum, then the squares of the deviations from their mean.
  VarPtr cnt = MakeVar("cnt", t), sum = MakeVar("sum", t), mean = MakeVar("avg", t);
  VarPtr sq = MakeVar("sq", t);
  const Expr dev = mb - Expr(mean);
  c.steps = {{cnt, ReduceOp::kSum, nb},
             {sum, ReduceOp::kSum, nb * mb},
             {mean, std::nullopt, MakeSelect(positive(cnt), Expr(sum) / Expr(cnt), zero)},
             {sq, ReduceOp::kSum, qb + nb * (dev * dev)}};
  c.from_steps = {cnt, mean, sq};
  return std::make_shared<const Combiner>(std::move(c));
}

Expr Instantiate(const Combiner& c, const Expr& e, const std::vector<Expr>& lhs,
                 const std::vector<Expr>& rhs, const std::vector<Expr>& step_results) {
  std::unordered_map<const VarNode*, Expr> map;
  for (size_t i = 0; i < lhs.size(); ++i) map[c.lhs[i].get()] = lhs[i];
  for (size_t i = 0; i < rhs.size(); ++i) map[c.rhs[i].get()] = rhs[i];
  for (size_t i = 0; i < step_results.size(); ++i) map[c.steps[i].result.get()] = step_results[i];
  return FoldUnits().Visit(Substitute(e, map));
}

Combination Combine(const Combiner& c, const std::vector<Expr>& lhs, const std::vector<Expr>& rhs,
                    const std::string& prefix) {
  Combination out;
  std::unordered_map<const VarNode*, Expr> map;
  for (size_t i = 0; i < c.size(); ++i) {
    map[c.lhs[i].get()] = lhs[i];
    map[c.rhs[i].get()] = rhs[i];
  }
  FoldUnits fold;
  for (const auto& [v, value] : c.lets) {
    VarPtr fresh = MakeVar(absl::StrCat(prefix, "_", v->name), v->dtype);
    out.lets.push_back({fresh, fold.Visit(Substitute(value, map))});
    map[v.get()] = fresh;
  }
  for (const Expr& r : c.combine) out.values.push_back(fold.Visit(Substitute(r, map)));
  return out;
}

std::vector<Expr> CombineValues(const Combiner& c, const std::vector<Expr>& lhs,
                                const std::vector<Expr>& rhs) {
  std::unordered_map<const VarNode*, Expr> map;
  for (size_t i = 0; i < c.size(); ++i) {
    map[c.lhs[i].get()] = lhs[i];
    map[c.rhs[i].get()] = rhs[i];
  }
  FoldUnits fold;
  for (const auto& [v, value] : c.lets) map[v.get()] = Simplify(fold.Visit(Substitute(value, map)));
  std::vector<Expr> out;
  for (const Expr& r : c.combine) out.push_back(Simplify(fold.Visit(Substitute(r, map))));
  return out;
}

std::vector<Expr> UniformComponents(const Combiner& c, const std::vector<Expr>& values) {
  std::vector<Expr> known(c.size());
  for (size_t i = 0; i < c.size(); ++i) {
    if (IsImmediate(values[i])) known[i] = values[i];
  }
  // Drop the components whose combination does not fold from the known ones alone.
  for (bool changed = true; changed;) {
    changed = false;
    const std::vector<Expr> combined =
        CombineValues(c, KnownOr(known, c.lhs), KnownOr(known, c.rhs));
    for (size_t i = 0; i < c.size(); ++i) {
      if (known[i] && !IsImmediate(combined[i])) {
        known[i] = nullptr;
        changed = true;
      }
    }
  }
  return known;
}

std::vector<Expr> FoldUniform(const Combiner& c, const std::vector<Expr>& values, int64_t count) {
  const std::vector<Expr> known = UniformComponents(c, values);
  std::vector<Expr> result = KnownOr(known, c.lhs), power = KnownOr(known, c.rhs);
  for (size_t i = 0; i < c.size(); ++i) {
    if (known[i]) result[i] = c.identity[i];
  }
  // Only the known components are read back: each combines from known components alone.
  auto keep = [&](std::vector<Expr> v, const std::vector<Expr>& placeholders) {
    for (size_t i = 0; i < c.size(); ++i) {
      if (!known[i]) v[i] = placeholders[i];
    }
    return v;
  };
  const std::vector<Expr> lhs(c.lhs.begin(), c.lhs.end()), rhs(c.rhs.begin(), c.rhs.end());
  for (int64_t n = count; n > 0; n >>= 1) {
    if (n & 1) result = keep(CombineValues(c, result, power), lhs);
    power = keep(CombineValues(c, power, power), rhs);
  }
  std::vector<Expr> out(c.size());
  for (size_t i = 0; i < c.size(); ++i) {
    if (known[i] && IsImmediate(result[i])) out[i] = result[i];
  }
  return out;
}

bool CombineIsSlow(const Combiner& c, const std::vector<Expr>& known) {
  struct SlowFinder : ExprVisitor {
    bool found = false;
    void VisitBinary(const BinaryNode& n, const Expr& self) override {
      found |= n.op == BinaryOp::kDiv && !IsImmediate(n.b);
      ExprVisitor::VisitBinary(n, self);
    }
    void VisitCall(const CallNode& n, const Expr& self) override {
      found = true;
      ExprVisitor::VisitCall(n, self);
    }
  } finder;
  for (const Expr& v : CombineValues(c, KnownOr(known, c.lhs), KnownOr(known, c.rhs))) {
    finder.Visit(v);
  }
  return finder.found;
}

std::string ToString(const Combiner& c) {
  std::vector<std::string> lhs, rhs, identity, parts;
  for (size_t i = 0; i < c.size(); ++i) {
    lhs.push_back(c.lhs[i]->name);
    rhs.push_back(c.rhs[i]->name);
    identity.push_back(ToString(c.identity[i]));
  }
  for (const auto& [v, e] : c.lets) parts.push_back(absl::StrCat(v->name, " = ", ToString(e)));
  for (size_t i = 0; i < c.size(); ++i) {
    parts.push_back(absl::StrCat(lhs[i], "' = ", ToString(c.combine[i])));
  }
  return absl::StrCat("combiner ", c.name, "((", absl::StrJoin(lhs, ", "), "), (",
                      absl::StrJoin(rhs, ", "), ")) identity (", absl::StrJoin(identity, ", "),
                      "): ", absl::StrJoin(parts, "; "));
}

}  // namespace tessel::schedules
