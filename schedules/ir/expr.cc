#include "schedules/ir/expr.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "schedules/util/check.h"

namespace tessel::schedules {

const char* BinaryOpName(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "+";
    case BinaryOp::kSub:
      return "-";
    case BinaryOp::kMul:
      return "*";
    case BinaryOp::kDiv:
      return "/";
    case BinaryOp::kMod:
      return "%";
    case BinaryOp::kMin:
      return "min";
    case BinaryOp::kMax:
      return "max";
    case BinaryOp::kLt:
      return "<";
    case BinaryOp::kLe:
      return "<=";
    case BinaryOp::kGt:
      return ">";
    case BinaryOp::kGe:
      return ">=";
    case BinaryOp::kEq:
      return "==";
    case BinaryOp::kNe:
      return "!=";
    case BinaryOp::kAnd:
      return "&&";
    case BinaryOp::kOr:
      return "||";
  }
  return "?";
}

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t FloorMod(int64_t a, int64_t b) { return a - FloorDiv(a, b) * b; }

bool IsComparison(BinaryOp op) { return op >= BinaryOp::kLt && op <= BinaryOp::kNe; }

int BinaryOpPrecedence(BinaryOp op) {
  switch (op) {
    case BinaryOp::kMul:
    case BinaryOp::kDiv:
    case BinaryOp::kMod:
      return 5;
    case BinaryOp::kAdd:
    case BinaryOp::kSub:
      return 4;
    case BinaryOp::kLt:
    case BinaryOp::kLe:
    case BinaryOp::kGt:
    case BinaryOp::kGe:
      return 3;
    case BinaryOp::kEq:
    case BinaryOp::kNe:
      return 2;
    case BinaryOp::kAnd:
      return 1;
    case BinaryOp::kOr:
      return 0;
    case BinaryOp::kMin:
    case BinaryOp::kMax:
      return 10;  // printed as calls
  }
  return 10;
}

bool IsMathIntrinsic(const std::string& name) {
  return name == "exp" || name == "log" || name == "tanh" || name == "sqrt" || name == "rsqrt" ||
         name == "erf" || name == "abs";
}

Expr MakeInt(int64_t v, DType t) { return std::make_shared<IntImmNode>(v, t); }
Expr MakeFloat(double v, DType t) { return std::make_shared<FloatImmNode>(v, t); }
Expr MakeBool(bool v) { return std::make_shared<IntImmNode>(v ? 1 : 0, DType::kBool); }
VarPtr MakeVar(std::string name, DType t) { return std::make_shared<VarNode>(std::move(name), t); }

bool IsImmediate(const Expr& e) {
  return e != nullptr && (e->kind == ExprKind::kIntImm || e->kind == ExprKind::kFloatImm);
}

bool IsConstInt(const Expr& e, int64_t* value) {
  const auto* imm = As<IntImmNode>(e);
  if (imm == nullptr || imm->dtype == DType::kBool) return false;
  if (value != nullptr) *value = imm->value;
  return true;
}

namespace {

// Gives an immediate operand the type of the other operand.
Expr Retype(const Expr& imm, DType t) {
  if (imm->dtype == t) return imm;
  if (const auto* i = As<IntImmNode>(imm)) {
    if (IsFloat(t)) return MakeFloat(static_cast<double>(i->value), t);
    return MakeInt(i->value, t);
  }
  if (const auto* f = As<FloatImmNode>(imm)) {
    if (IsFloat(t)) return MakeFloat(f->value, t);
  }
  return nullptr;
}

bool IsImm(const Expr& e) { return As<IntImmNode>(e) || As<FloatImmNode>(e); }

}  // namespace

Expr MakeBinary(BinaryOp op, Expr a, Expr b) {
  TESSEL_CHECK(a && b) << "MakeBinary(" << BinaryOpName(op) << ") with a null operand";
  if (a->dtype != b->dtype && IsImm(b)) {
    if (Expr r = Retype(b, a->dtype)) b = r;
  }
  if (a->dtype != b->dtype && IsImm(a)) {
    if (Expr r = Retype(a, b->dtype)) a = r;
  }
  TESSEL_CHECK(a->dtype == b->dtype)
      << "operand types differ in " << ToString(a) << " " << BinaryOpName(op) << " " << ToString(b);
  const DType t = a->dtype;
  const bool logical = op == BinaryOp::kAnd || op == BinaryOp::kOr;
  const DType rt = (IsComparison(op) || logical) ? DType::kBool : t;

  // Constant folding on integers.
  int64_t x = 0, y = 0;
  const auto* ia = As<IntImmNode>(a);
  const auto* ib = As<IntImmNode>(b);
  if (ia && ib) {
    x = ia->value;
    y = ib->value;
    switch (op) {
      case BinaryOp::kAdd:
        return MakeInt(x + y, t);
      case BinaryOp::kSub:
        return MakeInt(x - y, t);
      case BinaryOp::kMul:
        return MakeInt(x * y, t);
      case BinaryOp::kDiv:
        if (y != 0) return MakeInt(FloorDiv(x, y), t);
        break;
      case BinaryOp::kMod:
        if (y != 0) return MakeInt(FloorMod(x, y), t);
        break;
      case BinaryOp::kMin:
        return MakeInt(std::min(x, y), t);
      case BinaryOp::kMax:
        return MakeInt(std::max(x, y), t);
      case BinaryOp::kLt:
      case BinaryOp::kLe:
      case BinaryOp::kGt:
      case BinaryOp::kGe:
      case BinaryOp::kEq:
      case BinaryOp::kNe:
        return MakeBool(EvalComparison(op, x, y));
      case BinaryOp::kAnd:
        return MakeBool(x && y);
      case BinaryOp::kOr:
        return MakeBool(x || y);
    }
  }
  // Identities that keep generated index arithmetic readable.
  if (IsInt(t)) {
    if (op == BinaryOp::kAdd && ia && ia->value == 0) return b;
    if ((op == BinaryOp::kAdd || op == BinaryOp::kSub) && ib && ib->value == 0) return a;
    if (op == BinaryOp::kMul && ((ia && ia->value == 0) || (ib && ib->value == 0)))
      return MakeInt(0, t);
    if (op == BinaryOp::kMul && ia && ia->value == 1) return b;
    if ((op == BinaryOp::kMul || op == BinaryOp::kDiv) && ib && ib->value == 1) return a;
    if (op == BinaryOp::kMod && ib && ib->value == 1) return MakeInt(0, t);
  }
  if (logical) {
    const bool a_true = ia && ia->value != 0, b_true = ib && ib->value != 0;
    const bool a_false = ia && ia->value == 0, b_false = ib && ib->value == 0;
    if (op == BinaryOp::kAnd) {
      if (a_true) return b;
      if (b_true) return a;
      if (a_false || b_false) return MakeBool(false);
    } else {
      if (a_false) return b;
      if (b_false) return a;
      if (a_true || b_true) return MakeBool(true);
    }
  }
  return std::make_shared<BinaryNode>(op, std::move(a), std::move(b), rt);
}

Expr MakeUnary(UnaryOp op, Expr a) {
  if (op == UnaryOp::kNeg) {
    if (const auto* i = As<IntImmNode>(a)) return MakeInt(-i->value, i->dtype);
    if (const auto* f = As<FloatImmNode>(a)) return MakeFloat(-f->value, f->dtype);
  }
  if (op == UnaryOp::kNot) {
    if (const auto* i = As<IntImmNode>(a)) return MakeBool(i->value == 0);
  }
  return std::make_shared<UnaryNode>(op, std::move(a));
}

Expr MakeSelect(Expr cond, Expr t, Expr f) {
  if (const auto* c = As<IntImmNode>(cond)) return c->value ? t : f;
  if (t->dtype != f->dtype && IsImm(f)) {
    if (Expr r = Retype(f, t->dtype)) f = r;
  }
  if (t->dtype != f->dtype && IsImm(t)) {
    if (Expr r = Retype(t, f->dtype)) t = r;
  }
  TESSEL_CHECK(t->dtype == f->dtype) << "select branches differ in type";
  return std::make_shared<SelectNode>(std::move(cond), std::move(t), std::move(f));
}

Expr MakeCast(DType t, Expr v) {
  if (v->dtype == t) return v;
  if (IsImm(v) && (IsFloat(t) || As<IntImmNode>(v))) {
    if (Expr r = Retype(v, t)) return r;
  }
  return std::make_shared<CastNode>(t, std::move(v));
}

Expr MakeCall(std::string name, std::vector<Expr> args, DType t) {
  return std::make_shared<CallNode>(std::move(name), std::move(args), t);
}

Expr MakeLoad(BufferPtr buffer, std::vector<Expr> indices) {
  TESSEL_CHECK(buffer->shape.size() == indices.size())
      << "load of " << buffer->name << " with " << indices.size() << " indices, rank "
      << buffer->shape.size();
  return std::make_shared<LoadNode>(std::move(buffer), std::move(indices));
}

Expr MakeMin(Expr a, Expr b) { return MakeBinary(BinaryOp::kMin, std::move(a), std::move(b)); }
Expr MakeMax(Expr a, Expr b) { return MakeBinary(BinaryOp::kMax, std::move(a), std::move(b)); }
Expr MakeAnd(Expr a, Expr b) {
  if (!a) return b;
  if (!b) return a;
  return MakeBinary(BinaryOp::kAnd, std::move(a), std::move(b));
}

Expr operator+(Expr a, Expr b) { return MakeBinary(BinaryOp::kAdd, std::move(a), std::move(b)); }
Expr operator-(Expr a, Expr b) { return MakeBinary(BinaryOp::kSub, std::move(a), std::move(b)); }
Expr operator*(Expr a, Expr b) { return MakeBinary(BinaryOp::kMul, std::move(a), std::move(b)); }
Expr operator/(Expr a, Expr b) { return MakeBinary(BinaryOp::kDiv, std::move(a), std::move(b)); }
Expr operator%(Expr a, Expr b) { return MakeBinary(BinaryOp::kMod, std::move(a), std::move(b)); }
Expr operator+(Expr a, int64_t b) { return std::move(a) + MakeInt(b); }
Expr operator-(Expr a, int64_t b) { return std::move(a) - MakeInt(b); }
Expr operator*(Expr a, int64_t b) { return std::move(a) * MakeInt(b); }
Expr operator/(Expr a, int64_t b) { return std::move(a) / MakeInt(b); }
Expr operator%(Expr a, int64_t b) { return std::move(a) % MakeInt(b); }
Expr operator<(Expr a, Expr b) { return MakeBinary(BinaryOp::kLt, std::move(a), std::move(b)); }
Expr operator<(Expr a, int64_t b) { return std::move(a) < MakeInt(b); }
Expr operator>=(Expr a, int64_t b) { return MakeBinary(BinaryOp::kGe, std::move(a), MakeInt(b)); }
Expr operator==(Expr a, int64_t b) { return MakeBinary(BinaryOp::kEq, std::move(a), MakeInt(b)); }

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "?";
}

Expr MakeZero(DType t) { return IsFloat(t) ? MakeFloat(0.0, t) : MakeInt(0, t); }

Expr ReduceIdentity(ReduceOp op, DType t) {
  switch (op) {
    case ReduceOp::kSum:
      return MakeZero(t);
    case ReduceOp::kMax:
      return IsFloat(t) ? MakeFloat(-std::numeric_limits<double>::infinity(), t)
                        : MakeInt(std::numeric_limits<int64_t>::min(), t);
    case ReduceOp::kMin:
      return IsFloat(t) ? MakeFloat(std::numeric_limits<double>::infinity(), t)
                        : MakeInt(std::numeric_limits<int64_t>::max(), t);
  }
  return nullptr;
}

Expr ReduceCombine(ReduceOp op, Expr acc, Expr value) {
  switch (op) {
    case ReduceOp::kSum:
      return std::move(acc) + std::move(value);
    case ReduceOp::kMax:
      return MakeMax(std::move(acc), std::move(value));
    case ReduceOp::kMin:
      return MakeMin(std::move(acc), std::move(value));
  }
  return nullptr;
}

namespace {

int Precedence(const Expr& e) {
  if (const auto* b = As<BinaryNode>(e)) return BinaryOpPrecedence(b->op);
  if (As<SelectNode>(e)) return -1;
  if (As<UnaryNode>(e)) return 6;
  if (const auto* i = As<IntImmNode>(e); i && i->value < 0) return 6;
  if (const auto* f = As<FloatImmNode>(e); f && f->value < 0) return 6;
  return 10;
}

void Print(std::ostream& os, const Expr& e);

void PrintOperand(std::ostream& os, const Expr& e, int min_prec) {
  if (Precedence(e) < min_prec) {
    os << "(";
    Print(os, e);
    os << ")";
  } else {
    Print(os, e);
  }
}

void Print(std::ostream& os, const Expr& e) {
  if (!e) {
    os << "<null>";
    return;
  }
  switch (e->kind) {
    case ExprKind::kIntImm: {
      const auto& n = static_cast<const IntImmNode&>(*e);
      if (n.dtype == DType::kBool) {
        os << (n.value ? "true" : "false");
      } else {
        os << n.value;
      }
      return;
    }
    case ExprKind::kFloatImm: {
      const auto& n = static_cast<const FloatImmNode&>(*e);
      if (std::isinf(n.value)) {
        os << (n.value < 0 ? "-inf" : "inf");
      } else {
        char buf[64];
        std::snprintf(buf, sizeof(buf), "%.9g", n.value);
        std::string s = buf;
        if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
        os << s;
      }
      if (n.dtype != DType::kFloat32) os << DTypeName(n.dtype);
      return;
    }
    case ExprKind::kVar:
      os << static_cast<const VarNode&>(*e).name;
      return;
    case ExprKind::kBinary: {
      const auto& n = static_cast<const BinaryNode&>(*e);
      if (n.op == BinaryOp::kMin || n.op == BinaryOp::kMax) {
        os << BinaryOpName(n.op) << "(";
        Print(os, n.a);
        os << ", ";
        Print(os, n.b);
        os << ")";
        return;
      }
      const int p = Precedence(e);
      PrintOperand(os, n.a, p);
      os << " " << BinaryOpName(n.op) << " ";
      PrintOperand(os, n.b, p + 1);
      return;
    }
    case ExprKind::kUnary: {
      const auto& n = static_cast<const UnaryNode&>(*e);
      os << (n.op == UnaryOp::kNeg ? "-" : "!");
      PrintOperand(os, n.a, 7);
      return;
    }
    case ExprKind::kSelect: {
      const auto& n = static_cast<const SelectNode&>(*e);
      os << "select(";
      Print(os, n.cond);
      os << ", ";
      Print(os, n.true_value);
      os << ", ";
      Print(os, n.false_value);
      os << ")";
      return;
    }
    case ExprKind::kCast: {
      const auto& n = static_cast<const CastNode&>(*e);
      os << DTypeName(n.dtype) << "(";
      Print(os, n.value);
      os << ")";
      return;
    }
    case ExprKind::kCall: {
      const auto& n = static_cast<const CallNode&>(*e);
      os << n.name << "(";
      for (size_t i = 0; i < n.args.size(); ++i) {
        if (i) os << ", ";
        Print(os, n.args[i]);
      }
      os << ")";
      return;
    }
    case ExprKind::kLoad: {
      const auto& n = static_cast<const LoadNode&>(*e);
      os << n.buffer->name << "[";
      for (size_t i = 0; i < n.indices.size(); ++i) {
        if (i) os << ", ";
        Print(os, n.indices[i]);
      }
      os << "]";
      return;
    }
  }
}

}  // namespace

std::string ToString(const Expr& e) {
  std::ostringstream os;
  Print(os, e);
  return os.str();
}

}  // namespace tessel::schedules
