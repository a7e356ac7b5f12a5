#include "schedules/ir/simplify.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "schedules/ir/stmt_functor.h"
#include "schedules/ir/structural.h"
#include "schedules/ir/substitute.h"
#include "schedules/util/check.h"

namespace tessel::schedules {
namespace {

using RangeMap = std::unordered_map<const VarNode*, std::pair<int64_t, int64_t>>;

// ---- Integer helpers (floor semantics).

// Greatest common divisor of the magnitudes (std::gcd is undefined for INT64_MIN). Returns 1
// where the result is not representable, which callers treat as "no common factor".
int64_t Gcd(int64_t a, int64_t b) {
  uint64_t x = a < 0 ? 0 - static_cast<uint64_t>(a) : static_cast<uint64_t>(a);
  uint64_t y = b < 0 ? 0 - static_cast<uint64_t>(b) : static_cast<uint64_t>(b);
  while (y != 0) {
    const uint64_t t = x % y;
    x = y;
    y = t;
  }
  return x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? 1
                                                                        : static_cast<int64_t>(x);
}

// ---- Intervals. kNegInf as a lower end and kPosInf as an upper end mean "unbounded"; any
// overflow widens the end it affects to unbounded, so intervals are always sound.

constexpr int64_t kNegInf = std::numeric_limits<int64_t>::min();
constexpr int64_t kPosInf = std::numeric_limits<int64_t>::max();

struct Interval {
  int64_t lo = kNegInf;
  int64_t hi = kPosInf;
  static Interval Point(int64_t v) { return {v, v}; }
  bool Finite() const { return lo != kNegInf && hi != kPosInf; }
  bool IsPoint() const { return Finite() && lo == hi; }
};

int64_t LoAdd(int64_t a, int64_t b) {
  int64_t r;
  if (a == kNegInf || b == kNegInf || __builtin_add_overflow(a, b, &r)) return kNegInf;
  return r;
}
int64_t HiAdd(int64_t a, int64_t b) {
  int64_t r;
  if (a == kPosInf || b == kPosInf || __builtin_add_overflow(a, b, &r)) return kPosInf;
  return r;
}
// Product of finite values, or `fallback` on overflow.
int64_t MulOr(int64_t a, int64_t b, int64_t fallback) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? fallback : r;
}

Interval Add(Interval a, Interval b) { return {LoAdd(a.lo, b.lo), HiAdd(a.hi, b.hi)}; }

Interval Scale(Interval a, int64_t k) {
  if (k == 0) return Interval::Point(0);
  if (k > 0) {
    return {a.lo == kNegInf ? kNegInf : MulOr(a.lo, k, kNegInf),
            a.hi == kPosInf ? kPosInf : MulOr(a.hi, k, kPosInf)};
  }
  return {a.hi == kPosInf ? kNegInf : MulOr(a.hi, k, kNegInf),
          a.lo == kNegInf ? kPosInf : MulOr(a.lo, k, kPosInf)};
}

Interval Mul(Interval a, Interval b) {
  if (a.IsPoint()) return Scale(b, a.lo);
  if (b.IsPoint()) return Scale(a, b.lo);
  if (a.Finite() && b.Finite()) {
    int64_t p[4];
    if (__builtin_mul_overflow(a.lo, b.lo, &p[0]) || __builtin_mul_overflow(a.lo, b.hi, &p[1]) ||
        __builtin_mul_overflow(a.hi, b.lo, &p[2]) || __builtin_mul_overflow(a.hi, b.hi, &p[3])) {
      return {};
    }
    return {*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
  }
  if (a.lo >= 0 && b.lo >= 0) return {MulOr(a.lo, b.lo, kNegInf), kPosInf};
  return {};
}

Interval DivConst(Interval a, int64_t c) {
  if (c == -1) return Scale(a, -1);
  if (c > 0) {
    return {a.lo == kNegInf ? kNegInf : FloorDiv(a.lo, c),
            a.hi == kPosInf ? kPosInf : FloorDiv(a.hi, c)};
  }
  return {a.hi == kPosInf ? kNegInf : FloorDiv(a.hi, c),
          a.lo == kNegInf ? kPosInf : FloorDiv(a.lo, c)};
}

Interval ModConst(Interval a, int64_t c) {
  if (c > 0) {
    if (a.Finite() && FloorDiv(a.lo, c) == FloorDiv(a.hi, c)) {
      return {FloorMod(a.lo, c), FloorMod(a.hi, c)};
    }
    if (a.lo >= 0) return {0, std::min(a.hi, c - 1)};
    return {0, c - 1};
  }
  return {c + 1, 0};  // floor modulo by a negative divisor lies in (c, 0]
}

Interval Union(Interval a, Interval b) { return {std::min(a.lo, b.lo), std::max(a.hi, b.hi)}; }

// ---- Ordering comparison of expressions (exact comparison: Identical, structural.h).

template <typename T>
int Cmp3(const T& a, const T& b) {
  return a < b ? -1 : (b < a ? 1 : 0);
}

int Compare(const Expr& a, const Expr& b);

int Compare(const std::vector<Expr>& a, const std::vector<Expr>& b) {
  if (int c = Cmp3(a.size(), b.size())) return c;
  for (size_t i = 0; i < a.size(); ++i) {
    if (int c = Compare(a[i], b[i])) return c;
  }
  return 0;
}

// A deterministic order of expressions that depends on no pointer value: by kind, dtype, then
// contents (variables by name). Distinct variables with the same name compare equal; callers
// use stable sorts so that such ties keep their order of appearance.
int Compare(const Expr& a, const Expr& b) {
  if (a == b) return 0;
  if (int c = Cmp3(static_cast<int>(a->kind), static_cast<int>(b->kind))) return c;
  if (int c = Cmp3(static_cast<int>(a->dtype), static_cast<int>(b->dtype))) return c;
  switch (a->kind) {
    case ExprKind::kIntImm:
      return Cmp3(static_cast<const IntImmNode&>(*a).value,
                  static_cast<const IntImmNode&>(*b).value);
    case ExprKind::kFloatImm:
      return Cmp3(std::bit_cast<uint64_t>(static_cast<const FloatImmNode&>(*a).value),
                  std::bit_cast<uint64_t>(static_cast<const FloatImmNode&>(*b).value));
    case ExprKind::kVar:
      return Cmp3(static_cast<const VarNode&>(*a).name, static_cast<const VarNode&>(*b).name);
    case ExprKind::kBinary: {
      const auto& x = static_cast<const BinaryNode&>(*a);
      const auto& y = static_cast<const BinaryNode&>(*b);
      if (int c = Cmp3(static_cast<int>(x.op), static_cast<int>(y.op))) return c;
      if (int c = Compare(x.a, y.a)) return c;
      return Compare(x.b, y.b);
    }
    case ExprKind::kUnary: {
      const auto& x = static_cast<const UnaryNode&>(*a);
      const auto& y = static_cast<const UnaryNode&>(*b);
      if (int c = Cmp3(static_cast<int>(x.op), static_cast<int>(y.op))) return c;
      return Compare(x.a, y.a);
    }
    case ExprKind::kSelect: {
      const auto& x = static_cast<const SelectNode&>(*a);
      const auto& y = static_cast<const SelectNode&>(*b);
      if (int c = Compare(x.cond, y.cond)) return c;
      if (int c = Compare(x.true_value, y.true_value)) return c;
      return Compare(x.false_value, y.false_value);
    }
    case ExprKind::kCast:
      return Compare(static_cast<const CastNode&>(*a).value,
                     static_cast<const CastNode&>(*b).value);
    case ExprKind::kCall: {
      const auto& x = static_cast<const CallNode&>(*a);
      const auto& y = static_cast<const CallNode&>(*b);
      if (int c = Cmp3(x.name, y.name)) return c;
      return Compare(x.args, y.args);
    }
    case ExprKind::kLoad: {
      const auto& x = static_cast<const LoadNode&>(*a);
      const auto& y = static_cast<const LoadNode&>(*b);
      if (int c = Cmp3(x.buffer->name, y.buffer->name)) return c;
      return Compare(x.indices, y.indices);
    }
  }
  return 0;
}

// ---- Comparison operators.

BinaryOp Mirror(BinaryOp op) {  // a op b  <=>  b Mirror(op) a
  switch (op) {
    case BinaryOp::kLt:
      return BinaryOp::kGt;
    case BinaryOp::kLe:
      return BinaryOp::kGe;
    case BinaryOp::kGt:
      return BinaryOp::kLt;
    case BinaryOp::kGe:
      return BinaryOp::kLe;
    default:
      return op;
  }
}

BinaryOp Invert(BinaryOp op) {  // !(a op b)  <=>  a Invert(op) b (integers)
  switch (op) {
    case BinaryOp::kLt:
      return BinaryOp::kGe;
    case BinaryOp::kLe:
      return BinaryOp::kGt;
    case BinaryOp::kGt:
      return BinaryOp::kLe;
    case BinaryOp::kGe:
      return BinaryOp::kLt;
    case BinaryOp::kEq:
      return BinaryOp::kNe;
    case BinaryOp::kNe:
      return BinaryOp::kEq;
    default:
      return op;
  }
}

// Whether `d op 0` holds for all d in `i`: 1 (always), 0 (never), -1 (unknown). Unbounded ends
// are the extreme int64 values, which make every test below fail as it should.
int Decide(BinaryOp op, Interval i) {
  switch (op) {
    case BinaryOp::kLt:
      return i.hi < 0 ? 1 : (i.lo >= 0 ? 0 : -1);
    case BinaryOp::kLe:
      return i.hi <= 0 ? 1 : (i.lo > 0 ? 0 : -1);
    case BinaryOp::kGt:
      return i.lo > 0 ? 1 : (i.hi <= 0 ? 0 : -1);
    case BinaryOp::kGe:
      return i.lo >= 0 ? 1 : (i.hi < 0 ? 0 : -1);
    case BinaryOp::kEq:
      return (i.lo == 0 && i.hi == 0) ? 1 : ((i.lo > 0 || i.hi < 0) ? 0 : -1);
    case BinaryOp::kNe:
      return (i.lo == 0 && i.hi == 0) ? 0 : ((i.lo > 0 || i.hi < 0) ? 1 : -1);
    default:
      return -1;
  }
}

bool IsIntVar(const Expr& e) { return As<VarNode>(e) && IsInt(e->dtype); }

// A comparison `var op constant` (the canonical form puts the var on the left).
bool IsFact(const Expr& e) {
  const auto* n = As<BinaryNode>(e);
  return n && IsComparison(n->op) && IsIntVar(n->a) && IsConstInt(n->b);
}

void FlattenLogic(BinaryOp op, const Expr& e, std::vector<Expr>* out) {
  if (const auto* n = As<BinaryNode>(e); n && n->op == op) {
    FlattenLogic(op, n->a, out);
    FlattenLogic(op, n->b, out);
    return;
  }
  out->push_back(e);
}

// ---- Bounds of an expression (no simplification).

Interval Bound(const Expr& e, const RangeMap& ranges) {
  const bool is_bool = e->dtype == DType::kBool;
  switch (e->kind) {
    case ExprKind::kIntImm:
      return Interval::Point(static_cast<const IntImmNode&>(*e).value);
    case ExprKind::kFloatImm:
      return {};
    case ExprKind::kVar: {
      auto it = ranges.find(static_cast<const VarNode*>(e.get()));
      if (it != ranges.end()) return {it->second.first, it->second.second};
      return is_bool ? Interval{0, 1} : Interval{};
    }
    case ExprKind::kBinary: {
      const auto& n = static_cast<const BinaryNode&>(*e);
      if (is_bool) return {0, 1};
      if (!IsInt(e->dtype)) return {};
      const Interval a = Bound(n.a, ranges);
      const Interval b = Bound(n.b, ranges);
      switch (n.op) {
        case BinaryOp::kAdd:
          return Add(a, b);
        case BinaryOp::kSub:
          return Add(a, Scale(b, -1));
        case BinaryOp::kMul:
          return Mul(a, b);
        case BinaryOp::kDiv:
          if (b.IsPoint() && b.lo != 0) return DivConst(a, b.lo);
          return {};
        case BinaryOp::kMod:
          if (b.IsPoint() && b.lo != 0) return ModConst(a, b.lo);
          if (b.lo > 0 && b.hi != kPosInf) {
            return {0, a.lo >= 0 ? std::min(a.hi, b.hi - 1) : b.hi - 1};
          }
          return {};
        case BinaryOp::kMin:
          return {std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
        case BinaryOp::kMax:
          return {std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
        default:
          return {};
      }
    }
    case ExprKind::kUnary: {
      const auto& n = static_cast<const UnaryNode&>(*e);
      if (n.op == UnaryOp::kNot || is_bool) return {0, 1};
      if (!IsInt(e->dtype)) return {};
      return Scale(Bound(n.a, ranges), -1);
    }
    case ExprKind::kSelect: {
      const auto& n = static_cast<const SelectNode&>(*e);
      if (!IsInt(e->dtype) && !is_bool) return {};
      if (const auto* c = As<IntImmNode>(n.cond)) {
        return Bound(c->value ? n.true_value : n.false_value, ranges);
      }
      return Union(Bound(n.true_value, ranges), Bound(n.false_value, ranges));
    }
    case ExprKind::kCast: {
      const auto& n = static_cast<const CastNode&>(*e);
      if (is_bool) return {0, 1};
      if (IsInt(e->dtype) && (IsInt(n.value->dtype) || n.value->dtype == DType::kBool)) {
        return Bound(n.value, ranges);
      }
      return {};
    }
    case ExprKind::kCall:
    case ExprKind::kLoad:
      return is_bool ? Interval{0, 1} : Interval{};
  }
  return {};
}

// ---- The canonical linear form.

struct Term {
  Expr atom;  // never an immediate, a sum or a product with a constant
  int64_t coef;
};

struct Linear {
  DType dtype = kIndexType;
  std::vector<Term> terms;
  int64_t k = 0;  // the constant
  bool IsConst() const { return terms.empty(); }
};

Linear ConstLinear(int64_t v, DType t) {
  Linear l;
  l.dtype = t;
  l.k = v;
  return l;
}

Linear AtomLinear(Expr e) {
  Linear l;
  l.dtype = e->dtype;
  l.terms.push_back({std::move(e), 1});
  return l;
}

// Products of non-constant factors are flattened into their factors.
void FlattenProduct(const Expr& e, std::vector<Expr>* out) {
  if (const auto* m = As<BinaryNode>(e);
      m && m->op == BinaryOp::kMul && !As<IntImmNode>(m->a) && !As<IntImmNode>(m->b)) {
    FlattenProduct(m->a, out);
    FlattenProduct(m->b, out);
    return;
  }
  out->push_back(e);
}

// The canonical product of two atoms: factors sorted by Compare, nested to the left.
Expr MulAtoms(const Expr& x, const Expr& y) {
  std::vector<Expr> f;
  FlattenProduct(x, &f);
  FlattenProduct(y, &f);
  std::stable_sort(f.begin(), f.end(),
                   [](const Expr& a, const Expr& b) { return Compare(a, b) < 0; });
  Expr r = f[0];
  for (size_t i = 1; i < f.size(); ++i) r = MakeBinary(BinaryOp::kMul, r, f[i]);
  return r;
}

// Folding of float immediates: f32 in single precision, f64 in double; other types are left.
Expr FoldFloat(BinaryOp op, const Expr& a, const Expr& b) {
  const auto* fa = As<FloatImmNode>(a);
  const auto* fb = As<FloatImmNode>(b);
  if (!fa || !fb || a->dtype != b->dtype) return nullptr;
  const DType t = a->dtype;
  if (t != DType::kFloat32 && t != DType::kFloat64) return nullptr;
  double x = fa->value, y = fb->value;
  if (t == DType::kFloat32) {
    x = static_cast<float>(x);
    y = static_cast<float>(y);
  }
  auto round = [t](double v) { return t == DType::kFloat32 ? static_cast<float>(v) : v; };
  switch (op) {
    case BinaryOp::kAdd:
      return MakeFloat(t == DType::kFloat32 ? static_cast<float>(x) + static_cast<float>(y) : x + y,
                       t);
    case BinaryOp::kSub:
      return MakeFloat(t == DType::kFloat32 ? static_cast<float>(x) - static_cast<float>(y) : x - y,
                       t);
    case BinaryOp::kMul:
      return MakeFloat(t == DType::kFloat32 ? static_cast<float>(x) * static_cast<float>(y) : x * y,
                       t);
    case BinaryOp::kDiv:
      if (y == 0) return nullptr;
      return MakeFloat(t == DType::kFloat32 ? static_cast<float>(x) / static_cast<float>(y) : x / y,
                       t);
    case BinaryOp::kMin:
      if (x != x || y != y) return nullptr;
      return MakeFloat(round(std::min(x, y)), t);
    case BinaryOp::kMax:
      if (x != x || y != y) return nullptr;
      return MakeFloat(round(std::max(x, y)), t);
    case BinaryOp::kLt:
    case BinaryOp::kLe:
    case BinaryOp::kGt:
    case BinaryOp::kGe:
    case BinaryOp::kEq:
    case BinaryOp::kNe:
      return MakeBool(EvalComparison(op, x, y));
    default:
      return nullptr;
  }
}

// Narrows the ranges with the conjuncts of `cond` (or of !cond with `negate`) of the form
// `var op constant`.
void Narrow(const Expr& cond, bool negate, RangeMap* ranges) {
  if (const auto* u = As<UnaryNode>(cond); u && u->op == UnaryOp::kNot) {
    Narrow(u->a, !negate, ranges);
    return;
  }
  const auto* n = As<BinaryNode>(cond);
  if (!n) return;
  if (n->op == (negate ? BinaryOp::kOr : BinaryOp::kAnd)) {
    Narrow(n->a, negate, ranges);
    Narrow(n->b, negate, ranges);
    return;
  }
  int64_t k;
  if (!IsComparison(n->op) || !IsIntVar(n->a) || !IsConstInt(n->b, &k)) return;
  if (k == kNegInf || k == kPosInf) return;
  const auto* v = static_cast<const VarNode*>(n->a.get());
  std::pair<int64_t, int64_t> r = {kNegInf, kPosInf};
  if (auto it = ranges->find(v); it != ranges->end()) r = it->second;
  switch (negate ? Invert(n->op) : n->op) {
    case BinaryOp::kLt:
      r.second = std::min(r.second, k - 1);
      break;
    case BinaryOp::kLe:
      r.second = std::min(r.second, k);
      break;
    case BinaryOp::kGt:
      r.first = std::max(r.first, k + 1);
      break;
    case BinaryOp::kGe:
      r.first = std::max(r.first, k);
      break;
    case BinaryOp::kEq:
      r.first = std::max(r.first, k);
      r.second = std::min(r.second, k);
      break;
    default:
      return;
  }
  if (r.first > r.second) return;  // unreachable branch: keep what we knew
  (*ranges)[v] = r;
}

// ---- The expression simplifier.

class Simplifier {
 public:
  explicit Simplifier(const RangeMap& ranges) : ranges_(ranges) {}

  Expr Run(const Expr& e) {
    if (!e) return e;
    overflow_ = false;
    Expr r = Simp(e);
    if (overflow_ || Identical(r, e)) return e;
    return r;
  }

  Interval BoundOf(const Expr& e) const { return Bound(e, ranges_); }

 private:
  // Checked arithmetic on coefficients; an overflow abandons the simplification (Run returns its
  // input).
  int64_t CAdd(int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) overflow_ = true;
    return r;
  }
  int64_t CMul(int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r)) overflow_ = true;
    return r;
  }

  void AddTerm(Linear* l, const Expr& atom, int64_t coef) {
    for (Term& t : l->terms) {
      if (Identical(t.atom, atom)) {
        t.coef = CAdd(t.coef, coef);
        return;
      }
    }
    l->terms.push_back({atom, coef});
  }

  // dst += scale * src.
  void AddInto(Linear* dst, const Linear& src, int64_t scale) {
    for (const Term& t : src.terms) AddTerm(dst, t.atom, CMul(t.coef, scale));
    dst->k = CAdd(dst->k, CMul(src.k, scale));
  }

  Linear ScaleLinear(Linear l, int64_t s) {
    if (s == 0) return ConstLinear(0, l.dtype);
    for (Term& t : l.terms) t.coef = CMul(t.coef, s);
    l.k = CMul(l.k, s);
    return l;
  }

  Interval BoundLinear(const Linear& l) const {
    Interval r = Interval::Point(l.k);
    for (const Term& t : l.terms) {
      if (t.coef == 0) continue;
      r = Add(r, Scale(Bound(t.atom, ranges_), t.coef));
    }
    return r;
  }

  static void DropZeros(Linear* l) {
    l->terms.erase(
        std::remove_if(l->terms.begin(), l->terms.end(), [](const Term& t) { return t.coef == 0; }),
        l->terms.end());
  }

  // Whether l holds every term of m with exactly k times its coefficient (so that subtracting
  // k * m removes them).
  static bool ContainsScaled(const Linear& l, const Linear& m, int64_t k) {
    if (m.terms.empty()) return false;
    for (const Term& t : m.terms) {
      int64_t want;
      if (__builtin_mul_overflow(t.coef, k, &want)) return false;
      bool found = false;
      for (const Term& u : l.terms) {
        if (Identical(u.atom, t.atom)) {
          found = u.coef == want;
          break;
        }
      }
      if (!found) return false;
    }
    return true;
  }

  // Uses x == x / c * c + x % c on a term x / c with coefficient k * c:
  //   x / c * (k * c) + k * (x % c)  ->  k * x     (f / 16 * 16 + f % 16 -> f)
  //   k * x - x / c * (k * c)        ->  k * (x % c)   (f - f / 16 * 16 -> f % 16)
  // where x % c and x are compared in canonical form, so that nested splits collapse
  // (f / 32 * 32 + f % 32 / 4 * 4 + f % 4 -> f).
  bool RecombineDivMod(Linear* l) {
    for (size_t i = 0; i < l->terms.size(); ++i) {
      const auto* div = As<BinaryNode>(l->terms[i].atom);
      int64_t c;
      if (div && div->op == BinaryOp::kMod && IsConstInt(div->b, &c) && c > 1) {
        // The mirror image, from the remainder's side: y % c * k + y / c * (k * c) -> k * y,
        // where y / c is compared in canonical form, so that a row-major linearization of a
        // fused index collapses (x / 36 * 36 + x / 6 % 6 * 6 + x % 6 -> x: the 6 * (x / 6 %
        // 6) + 36 * (x / 36) pair first, x / 36 being x / 6 / 6).
        const int64_t k = l->terms[i].coef;
        const Expr y = div->a;
        const Linear whole = Canon(y, true);
        const Linear quot = DivLinear(whole, c);
        if (overflow_) return false;
        int64_t kc = 0;
        if (!__builtin_mul_overflow(k, c, &kc) && ContainsScaled(*l, quot, kc)) {
          l->terms[i].coef = 0;
          AddInto(l, quot, -kc);
          AddInto(l, whole, k);
          DropZeros(l);
          return true;
        }
        continue;
      }
      if (!div || div->op != BinaryOp::kDiv || !IsConstInt(div->b, &c) || c <= 1) continue;
      const int64_t coef = l->terms[i].coef;
      if (coef % c != 0) continue;
      const Expr x = div->a;  // keeps the numerator alive once the term is dropped
      const int64_t k = coef / c;
      const Linear whole = Canon(x, true);
      const Linear rem = ModLinear(whole, c);
      if (overflow_) return false;
      if (ContainsScaled(*l, rem, k)) {
        l->terms[i].coef = 0;
        AddInto(l, rem, -k);
        AddInto(l, whole, k);
        DropZeros(l);
        return true;
      }
      if (k != std::numeric_limits<int64_t>::min() && ContainsScaled(*l, whole, -k)) {
        l->terms[i].coef = 0;
        AddInto(l, whole, k);
        AddInto(l, rem, -k);
        DropZeros(l);
        return true;
      }
    }
    return false;
  }

  void Normalize(Linear* l) {
    DropZeros(l);
    for (int guard = 0; guard < 16 && RecombineDivMod(l); ++guard) DropZeros(l);
    std::stable_sort(l->terms.begin(), l->terms.end(), [](const Term& a, const Term& b) {
      const bool an = a.coef < 0, bn = b.coef < 0;
      if (an != bn) return bn;  // positive coefficients first
      const uint64_t ma = an ? 0 - static_cast<uint64_t>(a.coef) : a.coef;
      const uint64_t mb = bn ? 0 - static_cast<uint64_t>(b.coef) : b.coef;
      if (ma != mb) return ma > mb;
      return Compare(a.atom, b.atom) < 0;
    });
  }

  // Prints a linear form back as an expression: t1 * c1 + t2 * c2 - t3 * c3 + k.
  Expr ToExpr(Linear l) {
    Normalize(&l);
    const DType t = l.dtype;
    auto scaled = [t](const Expr& atom, int64_t mag) {
      return mag == 1 ? atom : MakeBinary(BinaryOp::kMul, atom, MakeInt(mag, t));
    };
    Expr acc;
    size_t i = 0;
    for (; i < l.terms.size() && l.terms[i].coef > 0; ++i) {
      Expr term = scaled(l.terms[i].atom, l.terms[i].coef);
      acc = acc ? MakeBinary(BinaryOp::kAdd, acc, term) : term;
    }
    bool k_done = false;
    if (!acc && i < l.terms.size()) {
      if (l.k > 0) {
        acc = MakeInt(l.k, t);
        k_done = true;
      } else {
        const Term& n = l.terms[i++];
        acc = n.coef == -1 ? MakeUnary(UnaryOp::kNeg, n.atom) : scaled(n.atom, n.coef);
      }
    }
    for (; i < l.terms.size(); ++i) {
      const Term& n = l.terms[i];
      if (n.coef == kNegInf) {
        acc = MakeBinary(BinaryOp::kAdd, acc, scaled(n.atom, n.coef));
      } else {
        acc = MakeBinary(BinaryOp::kSub, acc, scaled(n.atom, -n.coef));
      }
    }
    if (!k_done && l.k != 0) {
      if (!acc) {
        acc = MakeInt(l.k, t);
      } else if (l.k > 0 || l.k == kNegInf) {
        acc = MakeBinary(BinaryOp::kAdd, acc, MakeInt(l.k, t));
      } else {
        acc = MakeBinary(BinaryOp::kSub, acc, MakeInt(-l.k, t));
      }
    }
    return acc ? acc : MakeInt(0, t);
  }

  Linear MulLinear(const Linear& a, const Linear& b) {
    if (a.IsConst()) return ScaleLinear(b, a.k);
    if (b.IsConst()) return ScaleLinear(a, b.k);
    if ((a.terms.size() + 1) * (b.terms.size() + 1) > 64) {
      Expr x = ToExpr(a), y = ToExpr(b);
      if (Compare(y, x) < 0) std::swap(x, y);
      return AtomLinear(MakeBinary(BinaryOp::kMul, x, y));
    }
    Linear r = ConstLinear(CMul(a.k, b.k), a.dtype);
    for (const Term& ta : a.terms) {
      for (const Term& tb : b.terms)
        AddTerm(&r, MulAtoms(ta.atom, tb.atom), CMul(ta.coef, tb.coef));
    }
    for (const Term& ta : a.terms) AddTerm(&r, ta.atom, CMul(ta.coef, b.k));
    for (const Term& tb : b.terms) AddTerm(&r, tb.atom, CMul(tb.coef, a.k));
    return r;
  }

  // The linear form of an integer expression. With `simplified`, `e` is already canonical: only
  // the sums and products are taken apart, the other nodes are kept as terms.
  Linear Canon(const Expr& e, bool simplified) {
    if (const auto* imm = As<IntImmNode>(e)) return ConstLinear(imm->value, e->dtype);
    if (const auto* n = As<BinaryNode>(e)) {
      switch (n->op) {
        case BinaryOp::kAdd: {
          Linear l = Canon(n->a, simplified);
          AddInto(&l, Canon(n->b, simplified), 1);
          return l;
        }
        case BinaryOp::kSub: {
          Linear l = Canon(n->a, simplified);
          AddInto(&l, Canon(n->b, simplified), -1);
          return l;
        }
        case BinaryOp::kMul:
          return MulLinear(Canon(n->a, simplified), Canon(n->b, simplified));
        default:
          break;
      }
      if (simplified) return AtomLinear(e);
      switch (n->op) {
        case BinaryOp::kDiv:
        case BinaryOp::kMod: {
          Linear num = Canon(n->a, false);
          Linear den = Canon(n->b, false);
          if (den.IsConst() && den.k > 0) {
            return n->op == BinaryOp::kDiv ? DivLinear(std::move(num), den.k)
                                           : ModLinear(std::move(num), den.k);
          }
          return Canon(MakeBinary(n->op, ToExpr(std::move(num)), ToExpr(std::move(den))), true);
        }
        case BinaryOp::kMin:
        case BinaryOp::kMax:
          return MinMax(n->op, n->a, n->b);
        default:
          return AtomLinear(e);
      }
    }
    if (const auto* u = As<UnaryNode>(e); u && u->op == UnaryOp::kNeg) {
      return ScaleLinear(Canon(u->a, simplified), -1);
    }
    if (simplified || As<VarNode>(e)) return AtomLinear(e);
    return Canon(SimplifyChildren(e), true);
  }

  // ---- Division and modulo by a positive constant.

  Linear DivLinear(Linear n, int64_t c) {
    if (c == 1) return n;
    Normalize(&n);
    Linear q = ConstLinear(FloorDiv(n.k, c), n.dtype);
    Linear r = ConstLinear(FloorMod(n.k, c), n.dtype);
    // coef == (coef / c) * c + coef % c (truncating): the first part leaves the quotient exactly.
    for (const Term& t : n.terms) {
      if (t.coef / c != 0) AddTerm(&q, t.atom, t.coef / c);
      if (t.coef % c != 0) AddTerm(&r, t.atom, t.coef % c);
    }
    AddInto(&q, DivResidual(std::move(r), c), 1);
    return q;
  }

  Linear ModLinear(Linear n, int64_t c) {
    if (c == 1) return ConstLinear(0, n.dtype);
    Normalize(&n);
    Linear r = ConstLinear(FloorMod(n.k, c), n.dtype);
    for (const Term& t : n.terms) {
      if (t.coef % c != 0) AddTerm(&r, t.atom, t.coef % c);
    }
    return ModResidual(std::move(r), c);
  }

  // Whether every coefficient has a magnitude in (0, c) and 0 <= r.k < c.
  static bool IsResidual(const Linear& r, int64_t c) {
    if (r.k < 0 || r.k >= c) return false;
    for (const Term& t : r.terms) {
      if (t.coef == 0 || t.coef / c != 0) return false;  // |coef| < c
    }
    return true;
  }

  // gcd of c, the constant and every coefficient.
  static int64_t CommonFactor(const Linear& r, int64_t c) {
    int64_t g = Gcd(c, r.k);
    for (const Term& t : r.terms) g = Gcd(g, t.coef);
    return g;
  }

  Linear DivideBy(Linear r, int64_t g) {
    for (Term& t : r.terms) t.coef /= g;
    r.k /= g;
    return r;
  }

  // Splits r into a (terms whose coefficient is a multiple of some m > 1 dividing c) and b (the
  // rest and the constant) where 0 <= b < m is provable. Then (a + b) / c == a / c and
  // (a + b) % c == a % c + b.
  bool SplitLowBits(const Linear& r, int64_t c, Linear* a, Linear* b) {
    std::vector<int64_t> tried;
    for (const Term& t : r.terms) {
      const int64_t m = Gcd(t.coef, c);
      if (m <= 1 || m >= c || std::find(tried.begin(), tried.end(), m) != tried.end()) continue;
      tried.push_back(m);
      Linear hi = ConstLinear(0, r.dtype), lo = ConstLinear(r.k, r.dtype);
      for (const Term& u : r.terms) AddTerm(u.coef % m == 0 ? &hi : &lo, u.atom, u.coef);
      const Interval i = BoundLinear(lo);
      if (i.lo >= 0 && i.hi < m) {
        *a = std::move(hi);
        *b = std::move(lo);
        return true;
      }
    }
    return false;
  }

  // r / c where every coefficient of r has a magnitude in (0, c) and 0 <= r.k < c.
  Linear DivResidual(Linear r, int64_t c) {
    if (c == 1) return r;
    // Recombination (y - y / 2 * 2 -> y % 2) may enable the rules below; re-split if it left
    // the residual form.
    Normalize(&r);
    if (!IsResidual(r, c)) return DivLinear(std::move(r), c);
    if (r.IsConst()) return ConstLinear(FloorDiv(r.k, c), r.dtype);
    const Interval i = BoundLinear(r);
    if (i.Finite() && FloorDiv(i.lo, c) == FloorDiv(i.hi, c)) {
      return ConstLinear(FloorDiv(i.lo, c), r.dtype);
    }
    if (const int64_t g = CommonFactor(r, c); g > 1) return DivResidual(DivideBy(r, g), c / g);
    Linear a, b;
    if (SplitLowBits(r, c, &a, &b)) return DivResidual(std::move(a), c);
    // (x / a + k) / c == (x + k * a) / (a * c).
    if (r.terms.size() == 1 && r.terms[0].coef == 1) {
      const auto* inner = As<BinaryNode>(r.terms[0].atom);
      int64_t a_div, ac, ka;
      if (inner && inner->op == BinaryOp::kDiv && IsConstInt(inner->b, &a_div) && a_div > 0 &&
          !__builtin_mul_overflow(a_div, c, &ac) && !__builtin_mul_overflow(r.k, a_div, &ka)) {
        Linear x = Canon(inner->a, true);
        x.k = CAdd(x.k, ka);
        return DivLinear(std::move(x), ac);
      }
    }
    return AtomLinear(MakeBinary(BinaryOp::kDiv, ToExpr(std::move(r)), MakeInt(c, r.dtype)));
  }

  // r % c where every coefficient of r has a magnitude in (0, c) and 0 <= r.k < c.
  Linear ModResidual(Linear r, int64_t c) {
    if (c == 1) return ConstLinear(0, r.dtype);
    Normalize(&r);
    if (!IsResidual(r, c)) return ModLinear(std::move(r), c);
    if (r.IsConst()) return ConstLinear(FloorMod(r.k, c), r.dtype);
    const Interval i = BoundLinear(r);
    if (i.Finite() && FloorDiv(i.lo, c) == FloorDiv(i.hi, c)) {
      r.k = CAdd(r.k, CMul(-FloorDiv(i.lo, c), c));
      return r;
    }
    if (const int64_t g = CommonFactor(r, c); g > 1) {
      return ScaleLinear(ModResidual(DivideBy(r, g), c / g), g);
    }
    Linear a, b;
    if (SplitLowBits(r, c, &a, &b)) {
      Linear out = ModResidual(std::move(a), c);
      AddInto(&out, b, 1);
      return out;
    }
    // (x % a + k) % c == (x + k) % c when c divides a.
    if (r.terms.size() == 1 && r.terms[0].coef == 1) {
      const auto* inner = As<BinaryNode>(r.terms[0].atom);
      int64_t a_mod;
      if (inner && inner->op == BinaryOp::kMod && IsConstInt(inner->b, &a_mod) && a_mod > 0 &&
          a_mod % c == 0) {
        Linear x = Canon(inner->a, true);
        x.k = CAdd(x.k, r.k);
        return ModLinear(std::move(x), c);
      }
    }
    return AtomLinear(MakeBinary(BinaryOp::kMod, ToExpr(std::move(r)), MakeInt(c, r.dtype)));
  }

  // ---- min / max.

  Linear MinMax(BinaryOp op, const Expr& a, const Expr& b) {
    Linear la = Canon(a, false);
    Linear lb = Canon(b, false);
    Normalize(&la);
    Normalize(&lb);
    Linear d = la;
    AddInto(&d, lb, -1);
    const Interval i = BoundLinear(d);
    const bool a_le_b = i.hi <= 0, a_ge_b = i.lo >= 0;
    if (op == BinaryOp::kMin) {
      if (a_le_b) return la;
      if (a_ge_b) return lb;
    } else {
      if (a_ge_b) return la;
      if (a_le_b) return lb;
    }
    Expr x = ToExpr(std::move(la)), y = ToExpr(std::move(lb));
    // Deterministic operand order, a constant last: min(i, 10).
    if (As<IntImmNode>(x) || (!As<IntImmNode>(y) && Compare(y, x) < 0)) std::swap(x, y);
    return Canon(MakeBinary(op, x, y), true);
  }

  // ---- Everything else.

  Expr Simp(const Expr& e) {
    switch (e->kind) {
      case ExprKind::kIntImm:
      case ExprKind::kFloatImm:
      case ExprKind::kVar:
        return e;
      default:
        break;
    }
    if (IsInt(e->dtype)) return ToExpr(Canon(e, false));
    if (const auto* n = As<BinaryNode>(e)) {
      if (IsComparison(n->op)) return Comparison(n->op, n->a, n->b);
      if (n->op == BinaryOp::kAnd || n->op == BinaryOp::kOr) return Logic(n->op, e);
      Expr a = Simp(n->a), b = Simp(n->b);
      if (Expr f = FoldFloat(n->op, a, b)) return f;
      return MakeBinary(n->op, a, b);
    }
    return SimplifyChildren(e);
  }

  // A chain of && (or ||): operands simplified, constants and duplicates dropped, then each
  // operand simplified under the facts `var op constant` of the other operands kept (their
  // negations for ||): in x < 8 && y * 8 + x < 64 with y in [0, 8), the second operand is
  // implied and goes. Operands are visited in order and a dropped operand no longer serves as a
  // fact, so two operands never justify each other's removal.
  Expr Logic(BinaryOp op, const Expr& e) {
    const bool is_and = op == BinaryOp::kAnd;
    std::vector<Expr> parts, kept;
    FlattenLogic(op, e, &parts);
    for (const Expr& p : parts) {
      if (!AddOperand(op, Simp(p), &kept)) return MakeBool(!is_and);
    }
    // Rounds until no operand changes: a rewritten operand may be a new fact for the others.
    for (int round = 0; round < 8; ++round) {
      bool changed = false;
      for (size_t i = 0; i < kept.size();) {
        RangeMap narrowed = ranges_;
        bool any_fact = false;
        for (size_t j = 0; j < kept.size(); ++j) {
          if (j == i || !IsFact(kept[j])) continue;
          const auto* fact_var = static_cast<const VarNode*>(As<BinaryNode>(kept[j])->a.get());
          if (!UsesVar(kept[i], fact_var)) continue;
          Narrow(kept[j], /*negate=*/!is_and, &narrowed);
          any_fact = true;
        }
        if (!any_fact) {
          ++i;
          continue;
        }
        Simplifier inner(narrowed);
        Expr x = inner.Simp(kept[i]);
        overflow_ |= inner.overflow_;
        if (const auto* imm = As<IntImmNode>(x)) {
          if ((imm->value != 0) != is_and) return MakeBool(!is_and);
          kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(i));  // implied by the others
          continue;
        }
        if (!Identical(x, kept[i])) {
          kept[i] = x;
          changed = true;
        }
        ++i;
      }
      if (!changed) break;
      std::vector<Expr> again;
      for (const Expr& k : kept) {
        if (!AddOperand(op, k, &again)) return MakeBool(!is_and);
      }
      kept = std::move(again);
    }
    if (kept.empty()) return MakeBool(is_and);
    Expr r = kept[0];
    for (size_t i = 1; i < kept.size(); ++i) r = MakeBinary(op, r, kept[i]);
    return r;
  }

  // Appends the operands of the chain `x` to `kept`, skipping neutral constants and duplicates.
  // False when an operand is the absorbing constant (false for &&, true for ||).
  static bool AddOperand(BinaryOp op, const Expr& x, std::vector<Expr>* kept) {
    const bool is_and = op == BinaryOp::kAnd;
    std::vector<Expr> flat;
    FlattenLogic(op, x, &flat);
    for (const Expr& f : flat) {
      if (const auto* imm = As<IntImmNode>(f)) {
        if ((imm->value != 0) == is_and) continue;
        return false;
      }
      bool duplicate = false;
      for (const Expr& k : *kept) duplicate |= Identical(k, f);
      if (!duplicate) kept->push_back(f);
    }
    return true;
  }

  // Nodes other than integer arithmetic and comparisons: simplify the operands.
  Expr SimplifyChildren(const Expr& e) {
    switch (e->kind) {
      case ExprKind::kUnary: {
        const auto& n = static_cast<const UnaryNode&>(*e);
        Expr a = Simp(n.a);
        if (n.op == UnaryOp::kNot) {
          if (const auto* inner = As<UnaryNode>(a); inner && inner->op == UnaryOp::kNot) {
            return inner->a;
          }
          if (const auto* cmp = As<BinaryNode>(a);
              cmp && IsComparison(cmp->op) && IsInt(cmp->a->dtype)) {
            return Comparison(Invert(cmp->op), cmp->a, cmp->b);
          }
        }
        return MakeUnary(n.op, a);
      }
      case ExprKind::kSelect: {
        const auto& n = static_cast<const SelectNode&>(*e);
        Expr c = Simp(n.cond);
        if (const auto* imm = As<IntImmNode>(c)) {
          return Simp(imm->value ? n.true_value : n.false_value);
        }
        Expr t = Simp(n.true_value), f = Simp(n.false_value);
        if (Identical(t, f)) return t;
        return MakeSelect(c, t, f);
      }
      case ExprKind::kCast: {
        const auto& n = static_cast<const CastNode&>(*e);
        return MakeCast(n.dtype, Simp(n.value));
      }
      case ExprKind::kCall: {
        const auto& n = static_cast<const CallNode&>(*e);
        std::vector<Expr> args;
        for (const Expr& a : n.args) args.push_back(Simp(a));
        return MakeCall(n.name, std::move(args), n.dtype);
      }
      case ExprKind::kLoad: {
        const auto& n = static_cast<const LoadNode&>(*e);
        std::vector<Expr> idx;
        for (const Expr& i : n.indices) idx.push_back(Simp(i));
        return MakeLoad(n.buffer, std::move(idx));
      }
      case ExprKind::kBinary:
        return Simp(e);
      default:
        return e;
    }
  }

  Expr Comparison(BinaryOp op, const Expr& a, const Expr& b) {
    if (!IsInt(a->dtype) || !IsInt(b->dtype)) {
      Expr x = Simp(a), y = Simp(b);
      if (Expr f = FoldFloat(op, x, y)) return f;
      if (x->dtype == DType::kBool && Identical(x, y)) {
        return MakeBool(op == BinaryOp::kEq || op == BinaryOp::kLe || op == BinaryOp::kGe);
      }
      return MakeBinary(op, x, y);
    }
    Linear d = Canon(a, false);
    AddInto(&d, Canon(b, false), -1);
    Normalize(&d);
    if (const int decided = Decide(op, BoundLinear(d)); decided >= 0) return MakeBool(decided);
    if (d.IsConst()) return MakeBinary(op, MakeInt(d.k, d.dtype), MakeInt(0, d.dtype));
    // Orient the difference: d > 0 and d >= 0 become -d < 0 and -d <= 0, so that x < y and
    // y > x print the same; d == 0 and d != 0 are oriented so that their leading term (largest
    // coefficient magnitude, then structural order, sign ignored) is positive.
    bool negate = op == BinaryOp::kGt || op == BinaryOp::kGe;
    if (op == BinaryOp::kEq || op == BinaryOp::kNe) {
      size_t lead = 0;
      auto magnitude = [](int64_t v) { return v < 0 ? 0 - static_cast<uint64_t>(v) : v; };
      for (size_t i = 1; i < d.terms.size(); ++i) {
        const uint64_t mi = magnitude(d.terms[i].coef), ml = magnitude(d.terms[lead].coef);
        if (mi > ml || (mi == ml && Compare(d.terms[i].atom, d.terms[lead].atom) < 0)) lead = i;
      }
      negate = d.terms[lead].coef < 0;
    }
    if (negate) {
      d = ScaleLinear(std::move(d), -1);
      op = Mirror(op);
    }
    // sum(coef * t) op -k, divided by the gcd g of the coefficients: sum(coef / g * t) op rhs.
    int64_t g = 0;
    for (const Term& t : d.terms) g = Gcd(g, t.coef);
    const int64_t nk = CMul(d.k, -1);
    int64_t rhs = 0;
    switch (op) {
      case BinaryOp::kLt:
        // sum < nk / g  <=>  sum < ceil(nk / g)
        rhs = CMul(FloorDiv(CMul(nk, -1), g), -1);
        break;
      case BinaryOp::kLe:
        // sum <= nk / g  <=>  sum <= floor(nk / g)  <=>  sum < floor(nk / g) + 1
        rhs = CAdd(FloorDiv(nk, g), 1);
        op = BinaryOp::kLt;
        break;
      case BinaryOp::kEq:
        if (nk % g != 0) return MakeBool(false);
        rhs = nk / g;
        break;
      case BinaryOp::kNe:
        if (nk % g != 0) return MakeBool(true);
        rhs = nk / g;
        break;
      default:
        return MakeBinary(op, a, b);  // not reached
    }
    if (overflow_) return MakeBinary(op, a, b);
    // Terms with positive coefficients on the left, the others and the constant on the right:
    // P op N + rhs, op one of <, ==, !=. With no positive term (op is <), 0 < N + rhs is written
    // N >= 1 - rhs.
    Linear pos = ConstLinear(0, d.dtype), neg = ConstLinear(0, d.dtype);
    for (const Term& t : d.terms) {
      if (t.coef > 0) {
        AddTerm(&pos, t.atom, t.coef / g);
      } else {
        AddTerm(&neg, t.atom, CMul(t.coef / g, -1));
      }
    }
    if (pos.IsConst()) {
      const int64_t bound = CAdd(CMul(rhs, -1), 1);
      if (overflow_) return MakeBinary(op, a, b);
      return MakeBinary(BinaryOp::kGe, ToExpr(std::move(neg)), MakeInt(bound, d.dtype));
    }
    neg.k = rhs;
    return MakeBinary(op, ToExpr(std::move(pos)), ToExpr(std::move(neg)));
  }

  const RangeMap& ranges_;
  bool overflow_ = false;
};

// ---- Statements.

class StmtSimplifier final : public StmtMutator {
 public:
  explicit StmtSimplifier(RangeMap ranges) : ranges_(std::move(ranges)) {}

 protected:
  Expr VisitExpr(const Expr& e) override { return e ? Simplifier(ranges_).Run(e) : e; }

  Stmt VisitFor(const ForNode& n, const Stmt& self) override {
    Expr mn = VisitExpr(n.min), ext = VisitExpr(n.extent);
    Stmt body;
    {
      Simplifier s(ranges_);
      const Interval imin = s.BoundOf(mn), iext = s.BoundOf(ext);
      int64_t hi = 0;
      const bool bound = IsInt(n.var->dtype) && imin.Finite() && iext.hi != kPosInf &&
                         iext.hi >= 1 && !__builtin_add_overflow(imin.hi, iext.hi - 1, &hi);
      Scope scope(this, n.var.get());
      if (bound) ranges_[n.var.get()] = {imin.lo, hi};
      // A thread index of one value (threadIdx.z of a block one warpgroup deep) is that value,
      // so that no index keeps it: an index of a register array that does is no constant for
      // ptxas, and the array goes to local memory. (Serial loops of extent 1 keep their
      // variable: tensor intrinsics match it.)
      if (bound && imin.lo == hi && n.kind == ForKind::kThreadBinding &&
          n.thread != ThreadTag::kVThread) {
        body = Visit(Substitute(n.body, {{n.var.get(), MakeInt(hi, n.var->dtype)}}));
      } else {
        body = Visit(n.body);
      }
    }
    if (!body) return nullptr;
    if (mn == n.min && ext == n.extent && body == n.body) return self;
    return MakeFor(n.var, mn, ext, n.kind, n.thread, body, n.annotations);
  }

  Stmt VisitLetStmt(const LetStmtNode& n, const Stmt& self) override {
    Expr v = VisitExpr(n.value);
    Stmt body;
    {
      const Interval i = Simplifier(ranges_).BoundOf(v);
      Scope scope(this, n.var.get());
      if (IsInt(n.var->dtype) && (i.lo != kNegInf || i.hi != kPosInf)) {
        ranges_[n.var.get()] = {i.lo, i.hi};
      }
      body = Visit(n.body);
    }
    if (!body) return nullptr;
    if (v == n.value && body == n.body) return self;
    return MakeLet(n.var, v, body);
  }

  Stmt VisitIfThenElse(const IfThenElseNode& n, const Stmt& self) override {
    Expr c = VisitExpr(n.cond);
    if (const auto* imm = As<IntImmNode>(c)) return Visit(imm->value ? n.then_case : n.else_case);
    Stmt t = VisitNarrowed(n.then_case, c, false);
    Stmt e = VisitNarrowed(n.else_case, c, true);
    if (c == n.cond && t == n.then_case && e == n.else_case) return self;
    if (!t && !e) return nullptr;
    if (!t) return MakeIf(Simplifier(ranges_).Run(MakeUnary(UnaryOp::kNot, c)), e);
    return MakeIf(c, t, e);
  }

  Stmt VisitAllocate(const AllocateNode& n, const Stmt& self) override {
    Stmt body = Visit(n.body);
    if (!body) return nullptr;
    return body == n.body ? self : MakeAllocate(n.buffer, body);
  }

 private:
  // Restores the range of a var at the end of a binding scope.
  class Scope {
   public:
    // A range declared through Analyzer::Bind stays in force where the statement gives none.
    Scope(StmtSimplifier* s, const VarNode* v) : s_(s), v_(v) {
      auto it = s->ranges_.find(v);
      had_ = it != s->ranges_.end();
      if (had_) saved_ = it->second;
    }
    ~Scope() {
      if (had_) {
        s_->ranges_[v_] = saved_;
      } else {
        s_->ranges_.erase(v_);
      }
    }

   private:
    StmtSimplifier* s_;
    const VarNode* v_;
    bool had_ = false;
    std::pair<int64_t, int64_t> saved_;
  };

  Stmt VisitNarrowed(const Stmt& s, const Expr& cond, bool negate) {
    if (!s) return s;
    RangeMap saved = ranges_;
    Narrow(cond, negate, &ranges_);
    Stmt r = Visit(s);
    ranges_ = std::move(saved);
    return r;
  }

  RangeMap ranges_;
};

}  // namespace

void Analyzer::Bind(const VarNode* v, int64_t min, int64_t extent) {
  TESSEL_CHECK(v != nullptr) << "Analyzer::Bind of a null var";
  int64_t hi;
  if (extent <= 0 || __builtin_add_overflow(min, extent - 1, &hi)) {
    ranges_.erase(v);
    return;
  }
  ranges_[v] = {min, hi};
}

Expr Analyzer::Simplify(const Expr& e) const { return Simplifier(ranges_).Run(e); }

Stmt Analyzer::Simplify(const Stmt& s) const { return StmtSimplifier(ranges_).Visit(s); }

bool Analyzer::ConstBounds(const Expr& e, int64_t* lo, int64_t* hi) const {
  if (!e || (!IsInt(e->dtype) && e->dtype != DType::kBool)) return false;
  Simplifier s(ranges_);
  const Interval i = s.BoundOf(s.Run(e));
  if (!i.Finite()) return false;
  if (lo) *lo = i.lo;
  if (hi) *hi = i.hi;
  return true;
}

bool Analyzer::CanProve(const Expr& cond) const {
  if (!cond) return false;
  const Expr r = Simplify(cond);  // keep the node alive while it is inspected
  const auto* imm = As<IntImmNode>(r);
  return imm != nullptr && imm->value != 0;
}

Expr Simplify(const Expr& e) { return Analyzer().Simplify(e); }
Stmt Simplify(const Stmt& s) { return Analyzer().Simplify(s); }

}  // namespace tessel::schedules
