#include "schedules/ir/affine.h"

#include "schedules/ir/expr_functor.h"
#include "schedules/ir/substitute.h"
#include "schedules/util/check.h"

namespace tessel::schedules {

Expr FlatIndex(const Buffer& buffer, const std::vector<Expr>& indices) {
  TESSEL_CHECK(indices.size() == buffer.shape.size())
      << "access of " << buffer.name << " with " << indices.size() << " indices, rank "
      << buffer.shape.size();
  const std::vector<int64_t> strides = buffer.Strides();
  Expr flat = MakeInt(0);
  for (size_t i = 0; i < indices.size(); ++i) {
    flat = flat + MakeCast(kIndexType, indices[i]) * MakeInt(strides[i]);
  }
  return flat;
}

Expr StorageIndex(const Buffer& buffer, const std::vector<Expr>& indices) {
  const int64_t atom = SwizzleAtomElements(buffer);
  if (atom == 0) return FlatIndex(buffer, indices);
  const size_t rank = buffer.shape.size();
  TESSEL_CHECK(rank >= 2 && indices.size() == rank && buffer.strides.empty())
      << "swizzled buffer " << buffer.name << " needs rank >= 2 and no explicit strides";
  const int64_t rows = buffer.shape[rank - 2], cols = buffer.shape[rank - 1];
  Expr outer = MakeInt(0);
  for (size_t i = 0; i + 2 < rank; ++i) {
    outer = outer * MakeInt(buffer.shape[i]) + MakeCast(kIndexType, indices[i]);
  }
  const Expr r = MakeCast(kIndexType, indices[rank - 2]);
  const Expr c = MakeCast(kIndexType, indices[rank - 1]);
  const Expr a = MakeInt(atom);
  return outer * MakeInt(rows * cols) + (c / a * MakeInt(rows) + r) * a + c % a;
}

int64_t SwizzledOffset(int64_t o, int64_t swizzle_bytes, int64_t element_bytes) {
  const int64_t byte = o * element_bytes;
  const int64_t phase = byte / 128 % (swizzle_bytes / 16);
  return (byte ^ (phase * 16)) / element_bytes;
}

int64_t SwizzlePeriodElements(int64_t swizzle_bytes, int64_t element_bytes) {
  return 8 * swizzle_bytes / element_bytes;
}

std::pair<Expr, Expr> SplitByPeriod(const Expr& o, int64_t period) {
  TESSEL_CHECK(period > 0 && (period & (period - 1)) == 0) << "period " << period;
  const AffineForm f = ToAffine(o);
  Expr outer, inner;
  const auto add = [&](Expr* sum, const Expr& t) { *sum = *sum ? *sum + t : t; };
  for (const auto& [term, coeff] : f.terms) {
    if (coeff == 0) continue;
    Expr t = MakeCast(o->dtype, term);
    if (coeff != 1) t = t * MakeInt(coeff, o->dtype);
    add(coeff % period == 0 ? &outer : &inner, t);
  }
  // The constant's remainder (non-negative: period is a power of two) stays inside.
  const int64_t rest = f.constant & (period - 1), multiple = f.constant - rest;
  if (multiple != 0) {
    outer = !outer         ? MakeInt(multiple, o->dtype)
            : multiple > 0 ? outer + MakeInt(multiple, o->dtype)
                           : outer - MakeInt(-multiple, o->dtype);
  }
  if (rest != 0 || !inner) add(&inner, MakeInt(rest, o->dtype));
  return {outer, inner};
}

namespace {

class TrailingConstantFolder final : public ExprMutator {
 public:
  Expr Run(const Expr& e) { return Visit(e); }

 protected:
  Expr VisitBinary(const BinaryNode& n, const Expr& self) override {
    Expr folded = ExprMutator::VisitBinary(n, self);
    const auto* outer = As<BinaryNode>(folded);
    int64_t c2 = 0, c1 = 0;
    if (outer == nullptr || !IsInt(outer->dtype) ||
        (outer->op != BinaryOp::kAdd && outer->op != BinaryOp::kSub) ||
        !IsConstInt(outer->b, &c2)) {
      return folded;
    }
    const auto* inner = As<BinaryNode>(outer->a);
    if (inner == nullptr || (inner->op != BinaryOp::kAdd && inner->op != BinaryOp::kSub) ||
        !IsConstInt(inner->b, &c1)) {
      return folded;
    }
    const int64_t total =
        (inner->op == BinaryOp::kAdd ? c1 : -c1) + (outer->op == BinaryOp::kAdd ? c2 : -c2);
    if (total == 0) return inner->a;
    return total > 0 ? inner->a + MakeInt(total, outer->dtype)
                     : inner->a - MakeInt(-total, outer->dtype);
  }
};

void AddScaled(AffineForm* into, const AffineForm& f, int64_t scale) {
  into->constant += f.constant * scale;
  for (const auto& [term, coeff] : f.terms) {
    bool merged = false;
    for (auto& [t, c] : into->terms) {
      if (t.get() == term.get()) {
        c += coeff * scale;
        merged = true;
        break;
      }
    }
    if (!merged) into->terms.emplace_back(term, coeff * scale);
  }
}

}  // namespace

AffineForm ToAffine(const Expr& e) {
  AffineForm f;
  int64_t c = 0;
  if (IsConstInt(e, &c)) {
    f.constant = c;
    return f;
  }
  if (const auto* b = As<BinaryNode>(e); b && IsInt(b->dtype)) {
    switch (b->op) {
      case BinaryOp::kAdd:
        AddScaled(&f, ToAffine(b->a), 1);
        AddScaled(&f, ToAffine(b->b), 1);
        return f;
      case BinaryOp::kSub:
        AddScaled(&f, ToAffine(b->a), 1);
        AddScaled(&f, ToAffine(b->b), -1);
        return f;
      case BinaryOp::kMul:
        if (IsConstInt(b->b, &c)) {
          AddScaled(&f, ToAffine(b->a), c);
          return f;
        }
        if (IsConstInt(b->a, &c)) {
          AddScaled(&f, ToAffine(b->b), c);
          return f;
        }
        break;
      default:
        break;
    }
  }
  if (const auto* cast = As<CastNode>(e); cast && IsInt(cast->dtype) && IsInt(cast->value->dtype)) {
    return ToAffine(cast->value);
  }
  if (const auto* u = As<UnaryNode>(e); u && u->op == UnaryOp::kNeg && IsInt(u->dtype)) {
    AddScaled(&f, ToAffine(u->a), -1);
    return f;
  }
  f.terms.emplace_back(e, 1);
  return f;
}

Expr FoldTrailingConstants(const Expr& e) { return TrailingConstantFolder().Run(e); }

bool SplitAffine(const Expr& e, const VarNode* v, int64_t* coeff, AffineForm* rest) {
  AffineForm f = ToAffine(e);
  *coeff = 0;
  rest->terms.clear();
  rest->constant = f.constant;
  for (const auto& [term, c] : f.terms) {
    if (term.get() == v) {
      *coeff += c;
    } else if (UsesVar(term, v)) {
      return false;
    } else if (c != 0) {
      rest->terms.emplace_back(term, c);
    }
  }
  return true;
}

bool AllMultiplesOf(const AffineForm& f, int64_t w) {
  if (f.constant % w != 0) return false;
  for (const auto& [term, c] : f.terms) {
    if (c % w != 0) return false;
  }
  return true;
}

}  // namespace tessel::schedules
