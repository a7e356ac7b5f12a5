#include "schedules/codegen/c_printer.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "schedules/ir/affine.h"
#include "schedules/ir/expr_functor.h"
#include "schedules/ir/stmt_analysis.h"
#include "schedules/ir/substitute.h"
#include "schedules/util/check.h"

namespace tessel::schedules::codegen {

// ---- Literals and names.

std::string FloatLiteral(double v, DType t) {
  char buf[64];
  const bool wide = t == DType::kFloat64;
  std::snprintf(buf, sizeof(buf), wide ? "%.17g" : "%.9g", v);
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  if (!wide) s += "f";
  return s;
}

std::string IntLiteral(int64_t v) {
  if (v == std::numeric_limits<int64_t>::min()) return "(-9223372036854775807LL - 1)";
  if (v > std::numeric_limits<int32_t>::max() || v < std::numeric_limits<int32_t>::min()) {
    return absl::StrCat(v, "LL");
  }
  return absl::StrCat(v);
}

bool IsCIdentifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

namespace {

// Words a name hint must not take: C++ keywords, CUDA built-ins and the names generated code
// calls (math functions, conversions, vector types).
const char* const kReservedNames[] = {"alignas",
                                      "alignof",
                                      "asm",
                                      "auto",
                                      "bool",
                                      "break",
                                      "case",
                                      "catch",
                                      "char",
                                      "class",
                                      "const",
                                      "constexpr",
                                      "const_cast",
                                      "continue",
                                      "decltype",
                                      "default",
                                      "delete",
                                      "do",
                                      "double",
                                      "dynamic_cast",
                                      "else",
                                      "enum",
                                      "explicit",
                                      "export",
                                      "extern",
                                      "false",
                                      "float",
                                      "for",
                                      "friend",
                                      "goto",
                                      "if",
                                      "inline",
                                      "int",
                                      "long",
                                      "mutable",
                                      "namespace",
                                      "new",
                                      "noexcept",
                                      "nullptr",
                                      "operator",
                                      "private",
                                      "protected",
                                      "public",
                                      "register",
                                      "reinterpret_cast",
                                      "return",
                                      "short",
                                      "signed",
                                      "sizeof",
                                      "static",
                                      "static_assert",
                                      "static_cast",
                                      "struct",
                                      "switch",
                                      "template",
                                      "this",
                                      "throw",
                                      "true",
                                      "try",
                                      "typedef",
                                      "typeid",
                                      "typename",
                                      "union",
                                      "unsigned",
                                      "using",
                                      "virtual",
                                      "void",
                                      "volatile",
                                      "wchar_t",
                                      "while",
                                      "and",
                                      "or",
                                      "not",
                                      "xor",
                                      "main",
                                      "std",
                                      "half",
                                      "half2",
                                      "nv_bfloat16",
                                      "threadIdx",
                                      "blockIdx",
                                      "blockDim",
                                      "gridDim",
                                      "warpSize",
                                      "min",
                                      "max",
                                      "abs",
                                      "exp",
                                      "expf",
                                      "log",
                                      "logf",
                                      "tanh",
                                      "tanhf",
                                      "sqrt",
                                      "sqrtf",
                                      "rsqrt",
                                      "rsqrtf",
                                      "erf",
                                      "erff",
                                      "fabs",
                                      "fabsf",
                                      "fmax",
                                      "fmaxf",
                                      "fmin",
                                      "fminf",
                                      "floor",
                                      "floorf",
                                      "fmod",
                                      "fmodf",
                                      "float2",
                                      "float4",
                                      "double2",
                                      "int2",
                                      "int4",
                                      "uint2",
                                      "uint4",
                                      "longlong2",
                                      "buffers",
                                      "INFINITY",
                                      "NAN",
                                      "size_t",
                                      "int32_t",
                                      "int64_t",
                                      "uint16_t",
                                      "uint32_t",
                                      "uint64_t",
                                      "memcpy",
                                      "make_float2",
                                      "make_float4",
                                      "make_double2",
                                      "make_int2",
                                      "make_int4",
                                      "make_longlong2"};

}  // namespace

NameTable::NameTable() {
  for (const char* w : kReservedNames) used_.insert(w);
}

std::string NameTable::Claim(std::string base) {
  if (used_.insert(base).second) return base;
  for (int i = 1;; ++i) {
    std::string cand = absl::StrCat(base, "_", i);
    if (used_.insert(cand).second) return cand;
  }
}

std::string NameTable::Unique(const std::string& hint) {
  std::string s;
  for (char c : hint) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (s.empty()) s = "v";
  if (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '_' || s.rfind("tessel_", 0) == 0) {
    s = "v_" + s;
  }
  return Claim(s);
}

std::string NameTable::Temp(const std::string& stem) { return Claim("tessel_" + stem); }

std::string ProgramHeaderComment(const Program& p, const std::string& target) {
  std::string s = absl::StrCat("// Generated by Tessel for ", target, ": program ", p.name, "\n");
  absl::StrAppend(&s, "// Index arithmetic: ", p.needs_int64_indices ? "64" : "32", " bits\n");
  absl::StrAppend(&s, "// Buffers:\n");
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    const Buffer& b = *p.buffers[i].buffer;
    std::vector<std::string> dims;
    for (int64_t d : b.shape) dims.push_back(absl::StrCat(d));
    absl::StrAppend(&s, "//   [", i, "] ", BufferRoleName(p.buffers[i].role), " ", b.name, ": ",
                    DTypeName(b.dtype), "[", absl::StrJoin(dims, ", "), "]");
    if (!b.strides.empty()) {
      absl::StrAppend(&s, " strides [", absl::StrJoin(b.strides, ", "), "]");
    }
    absl::StrAppend(&s, "\n");
  }
  return s;
}

std::string FloorDivHelpers(const std::string& qualifier, bool integer, bool floating) {
  std::string s;
  if (integer) {
    absl::StrAppend(&s, "// Floor division and modulo (rounding towards negative infinity).\n",
                    "template <typename T>\n", qualifier, " T tessel_floordiv(T a, T b) {\n",
                    "  const T q = a / b;\n",
                    "  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;\n", "}\n",
                    "template <typename T>\n", qualifier, " T tessel_floormod(T a, T b) {\n",
                    "  const T r = a % b;\n",
                    "  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;\n", "}\n");
  }
  if (floating) {
    absl::StrAppend(&s, qualifier, " float tessel_floormodf(float a, float b) {\n",
                    "  return a - floorf(a / b) * b;\n", "}\n", qualifier,
                    " double tessel_floormodf(double a, double b) {\n",
                    "  return a - floor(a / b) * b;\n", "}\n");
  }
  return s;
}

// ---- The printer: output.

void CodeGenC::Line(const std::string& s) {
  if (s.empty()) {
    out_ += "\n";
    return;
  }
  // Pragmas stay at the statement's indentation: nvcc, NVRTC and GCC accept indented pragmas.
  out_.append(indent_ * 2, ' ');
  out_ += s;
  out_ += "\n";
}

void CodeGenC::OpenBlock(const std::string& head, const std::string& comment) {
  Line((head.empty() ? "{" : head + " {") + comment);
  ++indent_;
  blocks_.emplace_back();
}

void CodeGenC::CloseBlock(const std::string& tail) {
  --indent_;
  TESSEL_CHECK(indent_ >= 0 && blocks_.size() > 1) << "unbalanced blocks in code generation";
  blocks_.pop_back();
  Line("}" + tail);
}

void CodeGenC::ElseBlock() {
  --indent_;
  blocks_.back().clear();
  Line("} else {");
  ++indent_;
}

std::string CodeGenC::TakeOutput() {
  std::string s = std::move(out_);
  out_.clear();
  return s;
}

bool CodeGenC::DeclareInBlock(const std::string& name) {
  return blocks_.back().insert(name).second;
}

void CodeGenC::ResetKernelState() {
  names_ = NameTable();
  var_names_.clear();
  bound_.clear();
  non_negative_.clear();
  buffer_names_.clear();
  var_override_.clear();
  load_override_.clear();
  blocks_.assign(1, {});
  indent_ = 0;
}

void CodeGenC::Fail(absl::Status s) {
  if (status_.ok()) status_ = std::move(s);
}

std::string CodeGenC::ComputeType(DType t) const {
  switch (t) {
    case DType::kBool:
      return "bool";
    case DType::kInt32:
      return "int";
    case DType::kInt64:
      return IndexType();
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat32:
      return "float";
    case DType::kFloat64:
      return "double";
  }
  return "?";
}

std::string CodeGenC::StorageType(DType t) {
  switch (t) {
    case DType::kBool:
      return "bool";
    case DType::kInt32:
      return storage_.int32;
    case DType::kInt64:
      return storage_.int64;
    case DType::kFloat16:
      uses_f16_ = true;
      return storage_.f16;
    case DType::kBFloat16:
      uses_bf16_ = true;
      return storage_.bf16;
    case DType::kFloat32:
      return "float";
    case DType::kFloat64:
      return "double";
  }
  return "?";
}

std::string CodeGenC::StorageToCompute(DType t, const std::string& s) {
  if (t == DType::kFloat16) {
    uses_f16_ = true;
    return absl::StrCat(storage_.f16_to_float, "(", s, ")");
  }
  if (t == DType::kBFloat16) {
    uses_bf16_ = true;
    return absl::StrCat(storage_.bf16_to_float, "(", s, ")");
  }
  return s;
}

std::string CodeGenC::ComputeToStorage(DType t, const std::string& s) {
  if (t == DType::kFloat16) {
    uses_f16_ = true;
    return absl::StrCat(storage_.float_to_f16, "(", s, ")");
  }
  if (t == DType::kBFloat16) {
    uses_bf16_ = true;
    return absl::StrCat(storage_.float_to_bf16, "(", s, ")");
  }
  return s;
}

// ---- Names.

std::string CodeGenC::BindBuffer(const Buffer* b) {
  auto it = buffer_names_.find(b);
  if (it != buffer_names_.end()) return it->second;
  std::string name = IsLoweringTemporary(b->name) ? b->name : names_.Unique(b->name);
  buffer_names_.emplace(b, name);
  return name;
}

std::string CodeGenC::BufferName(const Buffer* b) {
  auto it = buffer_names_.find(b);
  if (it != buffer_names_.end()) return it->second;
  Fail(absl::InvalidArgumentError(absl::StrCat(
      MemScopeName(b->scope), " buffer '", b->name,
      "' is used where it is not declared: a global buffer must be among its kernel's params and "
      "a shared or local buffer must be used inside its Allocate")));
  return "/*undeclared*/" + b->name;
}

std::string CodeGenC::BindVar(const VarNode* v, bool non_negative) {
  auto it = var_names_.find(v);
  if (it == var_names_.end()) {
    it = var_names_.emplace(v, IsLoweringTemporary(v->name) ? v->name : names_.Unique(v->name))
             .first;
  }
  ++bound_[v];
  if (non_negative) {
    non_negative_.insert(v);
  } else {
    non_negative_.erase(v);
  }
  return it->second;
}

void CodeGenC::UnbindVar(const VarNode* v) {
  if (--bound_[v] <= 0) non_negative_.erase(v);
}

// ---- Expressions.

bool CodeGenC::NonNegative(const Expr& e) const {
  int64_t c = 0;
  if (IsConstInt(e, &c)) return c >= 0;
  switch (e->kind) {
    case ExprKind::kVar:
      return non_negative_.count(static_cast<const VarNode*>(e.get())) > 0;
    case ExprKind::kBinary: {
      const auto& n = static_cast<const BinaryNode&>(*e);
      if (!IsInt(n.dtype)) return false;
      switch (n.op) {
        case BinaryOp::kAdd:
        case BinaryOp::kMul:
        case BinaryOp::kMin:
          return NonNegative(n.a) && NonNegative(n.b);
        case BinaryOp::kMax:
          return NonNegative(n.a) || NonNegative(n.b);
        case BinaryOp::kDiv:
          return NonNegative(n.a) && IsConstInt(n.b, &c) && c > 0;
        case BinaryOp::kMod:
          return IsConstInt(n.b, &c) && c > 0;  // floor modulo: in [0, c)
        default:
          return false;
      }
    }
    case ExprKind::kCast: {
      const auto& n = static_cast<const CastNode&>(*e);
      return IsInt(n.dtype) && IsInt(n.value->dtype) && NonNegative(n.value);
    }
    case ExprKind::kSelect: {
      const auto& n = static_cast<const SelectNode&>(*e);
      return IsInt(n.dtype) && NonNegative(n.true_value) && NonNegative(n.false_value);
    }
    default:
      return false;
  }
}

std::string CodeGenC::Operand(const Expr& e, int min_prec) {
  int prec = 0;
  std::string s = Print(e, &prec);
  return prec < min_prec ? "(" + s + ")" : s;
}

std::string CodeGenC::Access(const BufferPtr& buffer, const std::vector<Expr>& indices) {
  const std::string name = BufferName(buffer.get());
  if (IsLoweringTemporary(buffer->name) && indices.size() == buffer->shape.size() &&
      indices.size() <= 1) {
    return indices.empty() ? name : name + "[" + Print(indices[0]) + "]";
  }
  if (indices.size() != buffer->shape.size()) {
    Fail(absl::InvalidArgumentError(absl::StrCat("access of buffer '", buffer->name, "' with ",
                                                 indices.size(), " indices; it has rank ",
                                                 buffer->shape.size())));
    return name + "[0]";
  }
  return name + "[" +
         StorageOffset(*buffer, FoldTrailingConstants(StorageIndex(*buffer, indices))) + "]";
}

std::string CodeGenC::PrintBinary(const BinaryNode& n, int* prec) {
  const DType t = n.a->dtype;
  int64_t divisor = 0;
  switch (n.op) {
    case BinaryOp::kAdd:
    case BinaryOp::kSub: {
      if (std::string s = NarrowMath(n, prec); !s.empty()) return s;
      *prec = kPrecAdd;
      // Integer addition is associative: a + (b + c) prints as a + b + c.
      const auto* rhs = As<BinaryNode>(n.b);
      const bool flat = IsInt(t) && n.op == BinaryOp::kAdd && rhs && rhs->op == BinaryOp::kAdd;
      return Operand(n.a, kPrecAdd) + " " + BinaryOpName(n.op) + " " +
             Operand(n.b, flat ? kPrecAdd : kPrecAdd + 1);
    }
    case BinaryOp::kMul:
      if (std::string s = NarrowMath(n, prec); !s.empty()) return s;
      *prec = kPrecMul;
      return Operand(n.a, kPrecMul) + " * " + Operand(n.b, kPrecMul + 1);
    case BinaryOp::kDiv:
    case BinaryOp::kMod: {
      const bool div = n.op == BinaryOp::kDiv;
      if (IsFloat(t)) {
        if (div) {
          if (std::string s = NarrowMath(n, prec); !s.empty()) return s;
          *prec = kPrecMul;
          return Operand(n.a, kPrecMul) + " / " + Operand(n.b, kPrecMul + 1);
        }
        uses_float_floormod_ = true;
        *prec = kPrecPrimary;
        return absl::StrCat("tessel_floormodf(", Print(n.a), ", ", Print(n.b), ")");
      }
      if (t == DType::kBool) {
        Fail(absl::InvalidArgumentError(
            absl::StrCat("division of booleans in ", ToString(n.a), " / ", ToString(n.b))));
        return "0";
      }
      if (IsConstInt(n.b, &divisor) && divisor > 0 && NonNegative(n.a)) {
        *prec = kPrecMul;
        return Operand(n.a, kPrecMul) + (div ? " / " : " % ") + Operand(n.b, kPrecMul + 1);
      }
      uses_floordiv_ = true;
      *prec = kPrecPrimary;
      return absl::StrCat(div ? "tessel_floordiv<" : "tessel_floormod<", ComputeType(t), ">(",
                          Print(n.a), ", ", Print(n.b), ")");
    }
    case BinaryOp::kMin:
    case BinaryOp::kMax:
      *prec = kPrecPrimary;
      return MinMax(n.op == BinaryOp::kMax, t, Print(n.a), Print(n.b));
    case BinaryOp::kLt:
    case BinaryOp::kLe:
    case BinaryOp::kGt:
    case BinaryOp::kGe:
      *prec = kPrecRel;
      return Operand(n.a, kPrecRel) + " " + BinaryOpName(n.op) + " " + Operand(n.b, kPrecRel + 1);
    case BinaryOp::kEq:
    case BinaryOp::kNe:
      *prec = kPrecEq;
      return Operand(n.a, kPrecEq) + " " + BinaryOpName(n.op) + " " + Operand(n.b, kPrecEq + 1);
    case BinaryOp::kAnd:
      *prec = kPrecAnd;
      return Operand(n.a, kPrecAnd) + " && " + Operand(n.b, kPrecAnd + 1);
    case BinaryOp::kOr:
      *prec = kPrecOr;
      return Operand(n.a, kPrecOr) + " || " + Operand(n.b, kPrecOr + 1);
  }
  *prec = kPrecPrimary;
  return "?";
}

std::string CodeGenC::Print(const Expr& e, int* prec) {
  *prec = kPrecPrimary;
  if (!e) {
    Fail(absl::InternalError("null expression in code generation"));
    return "0";
  }
  switch (e->kind) {
    case ExprKind::kIntImm: {
      const auto& n = static_cast<const IntImmNode&>(*e);
      if (n.dtype == DType::kBool) return n.value ? "true" : "false";
      if (n.value < 0) *prec = kPrecUnary;
      return IntLiteral(n.value);
    }
    case ExprKind::kFloatImm: {
      const auto& n = static_cast<const FloatImmNode&>(*e);
      if (std::isnan(n.value)) return NanLiteral(n.dtype);
      if (std::isinf(n.value)) return InfLiteral(n.value < 0, n.dtype);
      if (n.value < 0 || std::signbit(n.value)) *prec = kPrecUnary;
      return FloatLiteral(n.value, n.dtype);
    }
    case ExprKind::kVar: {
      const auto* v = static_cast<const VarNode*>(e.get());
      if (auto it = var_override_.find(v); it != var_override_.end()) {
        *prec = it->second.second;
        return it->second.first;
      }
      auto it = var_names_.find(v);
      if (it == var_names_.end() || bound_[v] <= 0) {
        Fail(absl::InvalidArgumentError(absl::StrCat(
            "variable '", v->name,
            "' is used outside the loop or let that binds it; every variable of a kernel body "
            "must be bound by an enclosing For or LetStmt")));
        return "/*unbound*/" + v->name;
      }
      return it->second;
    }
    case ExprKind::kBinary:
      return PrintBinary(static_cast<const BinaryNode&>(*e), prec);
    case ExprKind::kUnary: {
      const auto& n = static_cast<const UnaryNode&>(*e);
      *prec = kPrecUnary;
      std::string a = Operand(n.a, kPrecUnary);
      if (n.op == UnaryOp::kNeg) return (a[0] == '-' ? "-(" + a + ")" : "-" + a);
      return "!" + a;
    }
    case ExprKind::kSelect: {
      const auto& n = static_cast<const SelectNode&>(*e);
      *prec = kPrecCond;
      return Operand(n.cond, kPrecCond + 1) + " ? " + Operand(n.true_value, kPrecCond + 1) + " : " +
             Operand(n.false_value, kPrecCond + 1);
    }
    case ExprKind::kCast: {
      const auto& n = static_cast<const CastNode&>(*e);
      const DType from = n.value->dtype;
      if (n.dtype == DType::kFloat16 || n.dtype == DType::kBFloat16) {
        return RoundToHalf(n.dtype, from, Print(n.value));
      }
      if (n.dtype == DType::kBool) return "static_cast<bool>(" + Print(n.value) + ")";
      if (ComputeType(n.dtype) == ComputeType(from)) return Print(n.value, prec);
      return "static_cast<" + ComputeType(n.dtype) + ">(" + Print(n.value) + ")";
    }
    case ExprKind::kCall: {
      const auto& n = static_cast<const CallNode&>(*e);
      if (!IsMathIntrinsic(n.name)) {
        if (std::string s = IntrinsicCall(n, prec); !s.empty()) return s;
      }
      std::vector<std::string> args;
      for (const Expr& a : n.args) args.push_back(Print(a));
      std::string s = IsMathIntrinsic(n.name) ? MathCall(n.name, n.dtype, args) : "";
      if (s.empty()) {
        Fail(absl::UnimplementedError(absl::StrCat(
            "call of '", n.name, "' (", ToString(e),
            "): the code generators support the math intrinsics exp, log, tanh, sqrt, rsqrt, "
            "erf and abs; tensor-core intrinsics need the tensorize lowering")));
        return "0";
      }
      return s;
    }
    case ExprKind::kLoad: {
      const auto& n = static_cast<const LoadNode&>(*e);
      if (auto it = load_override_.find(e.get()); it != load_override_.end()) {
        return StorageToCompute(n.dtype, it->second);
      }
      std::string s = StorageToCompute(n.dtype, LoadAccess(n));
      if (n.dtype == DType::kInt64 && !int64_indices_) s = "static_cast<int>(" + s + ")";
      return s;
    }
  }
  return "?";
}

// ---- Statements.

void CodeGenC::EmitStmt(const Stmt& s) {
  if (!s || failed()) return;
  switch (s->kind) {
    case StmtKind::kFor:
      EmitFor(static_cast<const ForNode&>(*s));
      return;
    case StmtKind::kStore:
      EmitStore(static_cast<const StoreNode&>(*s));
      return;
    case StmtKind::kAllocate:
      EmitAllocate(static_cast<const AllocateNode&>(*s));
      return;
    case StmtKind::kIfThenElse: {
      const auto& n = static_cast<const IfThenElseNode&>(*s);
      OpenBlock("if (" + Print(n.cond) + ")");
      EmitStmt(n.then_case);
      if (n.else_case) {
        ElseBlock();
        EmitStmt(n.else_case);
      }
      CloseBlock();
      return;
    }
    case StmtKind::kSeq:
      for (const Stmt& c : static_cast<const SeqNode&>(*s).stmts) EmitStmt(c);
      return;
    case StmtKind::kLetStmt: {
      const auto& n = static_cast<const LetStmtNode&>(*s);
      const std::string value = Print(n.value);
      const bool non_negative = IsInt(n.var->dtype) && NonNegative(n.value);
      const std::string name = BindVar(n.var.get(), non_negative);
      const bool nested = !DeclareInBlock(name);
      if (nested) {
        OpenBlock("");
        DeclareInBlock(name);
      }
      Line("const " + DeclaredType(n.var->dtype, n.value) + " " + name + " = " + value + ";");
      EmitStmt(n.body);
      if (nested) CloseBlock();
      UnbindVar(n.var.get());
      return;
    }
    case StmtKind::kBarrier:
      EmitBarrier(static_cast<const BarrierNode&>(*s));
      return;
    case StmtKind::kScope: {
      const auto& n = static_cast<const ScopeNode&>(*s);
      OpenBlock("", n.comment.empty() ? "" : "  // " + n.comment);
      EmitStmt(n.body);
      CloseBlock();
      return;
    }
    case StmtKind::kAllReduce:
      EmitAllReduce(static_cast<const AllReduceNode&>(*s));
      return;
    case StmtKind::kEvaluate:
      Line(Print(static_cast<const EvaluateNode&>(*s).value) + ";");
      return;
  }
}

std::string CodeGenC::StoredValue(const Buffer& dst, const Expr& value) {
  const DType t = dst.dtype;
  const StoreTarget target(this, &dst);
  // An element copied unchanged keeps its storage type (no round trip through float), a lane of
  // a vector load too.
  if (const auto* l = As<LoadNode>(value); l && l->dtype == t) {
    const auto it = load_override_.find(value.get());
    return it != load_override_.end() ? it->second : LoadAccess(*l);
  }
  // A value cast to the half type it is stored as is converted once.
  if (const auto* c = As<CastNode>(value);
      c && NarrowStore() && c->dtype == t &&
      (c->value->dtype == DType::kFloat32 || c->value->dtype == DType::kFloat16 ||
       c->value->dtype == DType::kBFloat16)) {
    return ComputeToStorage(t, Print(c->value));
  }
  return ComputeToStorage(t, Print(value));
}

void CodeGenC::EmitStore(const StoreNode& n) {
  Line(StoreStatement(n, Access(n.buffer, n.indices), StoredValue(*n.buffer, n.value)));
}

std::string CodeGenC::AnnotationComment(const ForNode& n) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : n.annotations) parts.push_back(absl::StrCat(k, "=", v));
  return parts.empty() ? "" : "  // " + absl::StrJoin(parts, ", ");
}

std::string CodeGenC::AnnotationUnrollPragma(const ForNode& n, const std::string& unroll_pragma,
                                             bool full_needs_count) {
  for (const auto& [k, v] : n.annotations) {
    if (k == "pragma_unroll" && v > 0) return absl::StrCat(unroll_pragma, " ", v);
    if (k == "unroll_max_step" && v > 0) {
      // As TVM's auto-unroll: unroll the loop fully when its iterations, inner loops included,
      // stay within the budget.
      int64_t extent = 0;
      if (!IsConstInt(n.extent, &extent) || extent <= 0) continue;
      const int64_t inner = std::max<int64_t>(1, UnrollSteps(n.body));
      if (inner <= v / extent) {
        return full_needs_count ? absl::StrCat(unroll_pragma, " ", extent) : unroll_pragma;
      }
    }
  }
  return "";
}

void CodeGenC::EmitLoop(const ForNode& n, const std::vector<std::string>& pragmas,
                        const std::string& comment) {
  const std::string min = Print(n.min);
  const std::string end = Print(n.min + MakeCast(n.min->dtype, n.extent));
  const std::string name = BindVar(n.var.get(), NonNegative(n.min));
  for (const std::string& p : pragmas) {
    if (!p.empty()) Line(p);
  }
  const std::string type = ComputeType(n.var->dtype);
  OpenBlock(
      absl::StrCat("for (", type, " ", name, " = ", min, "; ", name, " < ", end, "; ++", name, ")"),
      comment.empty() ? AnnotationComment(n) : comment);
  EmitStmt(n.body);
  CloseBlock();
  UnbindVar(n.var.get());
}

}  // namespace tessel::schedules::codegen
