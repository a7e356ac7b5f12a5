#pragma once

// Scalar expressions of the tensor IR. The node list below is the single definition of the
// expression kinds: the kind enum, the visitor and the mutator (expr_functor.h) are generated
// from it. Nodes are immutable and shared (Expr is a shared_ptr to a const node).
//
// Integer division and modulo (BinaryOp::kDiv / kMod on integers) are floor division and floor
// modulo, as in Python; code generators emit plain C operators where the dividend is provably
// non-negative.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "schedules/ir/buffer.h"
#include "schedules/ir/dtype.h"

namespace tessel::schedules {

#define TESSEL_EXPR_NODES(X) \
  X(IntImm)                  \
  X(FloatImm)                \
  X(Var)                     \
  X(Binary)                  \
  X(Unary)                   \
  X(Select)                  \
  X(Cast)                    \
  X(Call)                    \
  X(Load)

enum class ExprKind : uint8_t {
#define TESSEL_X(name) k##name,
  TESSEL_EXPR_NODES(TESSEL_X)
#undef TESSEL_X
};

class ExprNode {
 public:
  virtual ~ExprNode() = default;
  const ExprKind kind;
  const DType dtype;

 protected:
  ExprNode(ExprKind k, DType t) : kind(k), dtype(t) {}
};
using Expr = std::shared_ptr<const ExprNode>;

// Index arithmetic is carried in 64 bits; code generators narrow it to 32 bits where every
// buffer of the program is small enough.
inline constexpr DType kIndexType = DType::kInt64;

struct IntImmNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kIntImm;
  IntImmNode(int64_t v, DType t) : ExprNode(kKind, t), value(v) {}
  const int64_t value;
};

struct FloatImmNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kFloatImm;
  FloatImmNode(double v, DType t) : ExprNode(kKind, t), value(v) {}
  const double value;
};

// A variable (loop variable, axis, let binding). Identity is by pointer; the name is a hint for
// printing and need not be unique.
struct VarNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kVar;
  VarNode(std::string n, DType t) : ExprNode(kKind, t), name(std::move(n)) {}
  const std::string name;
};
using VarPtr = std::shared_ptr<const VarNode>;

enum class BinaryOp : uint8_t {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMod,
  kMin,
  kMax,  // arithmetic (result: operand type)
  kLt,
  kLe,
  kGt,
  kGe,
  kEq,
  kNe,  // comparisons (result: bool)
  kAnd,
  kOr  // logic on bools
};
const char* BinaryOpName(BinaryOp op);  // "+", "-", ..., "min", "max", "<", "&&"
bool IsComparison(BinaryOp op);
// Floor division and modulo, the semantics of integer kDiv / kMod (b != 0).
int64_t FloorDiv(int64_t a, int64_t b);
int64_t FloorMod(int64_t a, int64_t b);
// The value of comparison `op` on two constants (op must be a comparison).
template <typename T>
bool EvalComparison(BinaryOp op, T x, T y) {
  switch (op) {
    case BinaryOp::kLt:
      return x < y;
    case BinaryOp::kLe:
      return x <= y;
    case BinaryOp::kGt:
      return x > y;
    case BinaryOp::kGe:
      return x >= y;
    case BinaryOp::kEq:
      return x == y;
    default:
      return x != y;  // kNe
  }
}
// Binding strength of the operator in the infix text of ToString and the workload format (higher
// binds tighter): * / % 5, + - 4, < <= > >= 3, == != 2, && 1, || 0; min and max print as calls
// (10, as atoms).
int BinaryOpPrecedence(BinaryOp op);

struct BinaryNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kBinary;
  BinaryNode(BinaryOp o, Expr x, Expr y, DType t)
      : ExprNode(kKind, t), op(o), a(std::move(x)), b(std::move(y)) {}
  const BinaryOp op;
  const Expr a, b;
};

enum class UnaryOp : uint8_t { kNeg, kNot };

struct UnaryNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kUnary;
  UnaryNode(UnaryOp o, Expr x) : ExprNode(kKind, x->dtype), op(o), a(std::move(x)) {}
  const UnaryOp op;
  const Expr a;
};

// cond ? t : f, evaluated lazily (only the chosen branch is evaluated, so a branch may hold a
// load that would be out of bounds when the condition is false).
struct SelectNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kSelect;
  SelectNode(Expr c, Expr t, Expr f)
      : ExprNode(kKind, t->dtype),
        cond(std::move(c)),
        true_value(std::move(t)),
        false_value(std::move(f)) {}
  const Expr cond, true_value, false_value;
};

struct CastNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kCast;
  CastNode(DType t, Expr v) : ExprNode(kKind, t), value(std::move(v)) {}
  const Expr value;
};

// A call of a pure intrinsic. Math functions: exp, log, tanh, sqrt, rsqrt, erf, abs. Tensor-core
// intrinsics (a later `tensorize` primitive) are calls too, evaluated for their effect through an
// Evaluate statement, with their buffer operands passed as Load expressions of the tile origin.
struct CallNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kCall;
  CallNode(std::string n, std::vector<Expr> as, DType t)
      : ExprNode(kKind, t), name(std::move(n)), args(std::move(as)) {}
  const std::string name;
  const std::vector<Expr> args;
};
bool IsMathIntrinsic(const std::string& name);

struct LoadNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kLoad;
  LoadNode(BufferPtr buf, std::vector<Expr> idx)
      : ExprNode(kKind, buf->dtype), buffer(std::move(buf)), indices(std::move(idx)) {}
  const BufferPtr buffer;
  const std::vector<Expr> indices;
};

// Checked downcast: nullptr when `e` is not a T.
template <typename T>
const T* As(const Expr& e) {
  return e && e->kind == T::kKind ? static_cast<const T*>(e.get()) : nullptr;
}

// ---- Builders. Binary builders fold constants and unify an immediate operand's type with the
// other operand's type; mixing two non-immediate operands of different types is a bug (checked).
Expr MakeInt(int64_t v, DType t = kIndexType);
Expr MakeFloat(double v, DType t = DType::kFloat32);
// 0 of type `t` (a float or an integer immediate).
Expr MakeZero(DType t);
Expr MakeBool(bool v);
VarPtr MakeVar(std::string name, DType t = kIndexType);
Expr MakeBinary(BinaryOp op, Expr a, Expr b);
Expr MakeUnary(UnaryOp op, Expr a);
Expr MakeSelect(Expr cond, Expr t, Expr f);
Expr MakeCast(DType t, Expr v);  // no-op when v already has type t
Expr MakeCall(std::string name, std::vector<Expr> args, DType t);
Expr MakeLoad(BufferPtr buffer, std::vector<Expr> indices);
Expr MakeMin(Expr a, Expr b);
Expr MakeMax(Expr a, Expr b);
Expr MakeAnd(Expr a, Expr b);  // nullptr operands are "true": MakeAnd(nullptr, c) == c

Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
Expr operator/(Expr a, Expr b);
Expr operator%(Expr a, Expr b);
Expr operator+(Expr a, int64_t b);
Expr operator-(Expr a, int64_t b);
Expr operator*(Expr a, int64_t b);
Expr operator/(Expr a, int64_t b);
Expr operator%(Expr a, int64_t b);
Expr operator<(Expr a, Expr b);
Expr operator<(Expr a, int64_t b);
Expr operator>=(Expr a, int64_t b);
Expr operator==(Expr a, int64_t b);

// The value of an integer immediate, or nullopt.
bool IsConstInt(const Expr& e, int64_t* value = nullptr);
// Whether `e` is an integer or float immediate.
bool IsImmediate(const Expr& e);

// Reductions of a compute definition and of a cross-thread AllReduce.
enum class ReduceOp : uint8_t { kSum, kMax, kMin };
const char* ReduceOpName(ReduceOp op);      // "sum", "max", "min"
Expr ReduceIdentity(ReduceOp op, DType t);  // 0, -inf, +inf
Expr ReduceCombine(ReduceOp op, Expr acc, Expr value);

// Human-readable infix form, used by `tessel lower --emit ir` and error messages.
std::string ToString(const Expr& e);

}  // namespace tessel::schedules
