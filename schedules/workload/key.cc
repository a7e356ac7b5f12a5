#include "schedules/workload/key.h"

#include <charconv>
#include <cmath>
#include <map>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "schedules/ir/dtype.h"
#include "schedules/ir/expr.h"
#include "schedules/util/fnv1a.h"

namespace tessel::schedules {
namespace {

// Binding strength of a node as printed (higher binds tighter); calls, loads and atoms are 10.
int Precedence(const Expr& e) {
  if (const auto* b = As<BinaryNode>(e)) return BinaryOpPrecedence(b->op);
  if (As<UnaryNode>(e)) return 6;
  // A negative literal of the default type prints with a leading '-'.
  if (const auto* i = As<IntImmNode>(e); i && i->value < 0 && i->dtype == kIndexType) return 6;
  if (const auto* f = As<FloatImmNode>(e);
      f && std::signbit(f->value) && f->dtype == DType::kFloat32) {
    return 6;
  }
  return 10;
}

// Shortest decimal form that reads back to the same double, always with a '.' or an exponent so
// that it lexes as a float.
std::string FloatText(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, ec == std::errc() ? ptr : buf);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

class CanonicalPrinter {
 public:
  CanonicalPrinter(const std::map<const Buffer*, std::string>& buffers,
                   const std::map<const VarNode*, std::string>& vars)
      : buffers_(buffers), vars_(vars) {}

  void Print(std::string* out, const Expr& e) const {
    if (!e) {
      out->append("<null>");
      return;
    }
    switch (e->kind) {
      case ExprKind::kIntImm: {
        const auto& n = static_cast<const IntImmNode&>(*e);
        if (n.dtype == kIndexType) {
          absl::StrAppend(out, n.value);
        } else {
          absl::StrAppend(out, DTypeName(n.dtype), "(", n.value, ")");
        }
        return;
      }
      case ExprKind::kFloatImm: {
        const auto& n = static_cast<const FloatImmNode&>(*e);
        if (n.dtype == DType::kFloat32) {
          out->append(FloatText(n.value));
        } else {
          absl::StrAppend(out, DTypeName(n.dtype), "(", FloatText(n.value), ")");
        }
        return;
      }
      case ExprKind::kVar: {
        const auto& n = static_cast<const VarNode&>(*e);
        auto it = vars_.find(&n);
        out->append(it != vars_.end() ? it->second : n.name);
        return;
      }
      case ExprKind::kBinary: {
        const auto& n = static_cast<const BinaryNode&>(*e);
        if (n.op == BinaryOp::kMin || n.op == BinaryOp::kMax) {
          absl::StrAppend(out, BinaryOpName(n.op), "(");
          Print(out, n.a);
          out->append(", ");
          Print(out, n.b);
          out->append(")");
          return;
        }
        const int p = Precedence(e);
        PrintOperand(out, n.a, p);
        absl::StrAppend(out, " ", BinaryOpName(n.op), " ");
        PrintOperand(out, n.b, p + 1);
        return;
      }
      case ExprKind::kUnary: {
        const auto& n = static_cast<const UnaryNode&>(*e);
        out->append(n.op == UnaryOp::kNeg ? "-" : "!");
        PrintOperand(out, n.a, 7);
        return;
      }
      case ExprKind::kSelect: {
        const auto& n = static_cast<const SelectNode&>(*e);
        out->append("select(");
        Print(out, n.cond);
        out->append(", ");
        Print(out, n.true_value);
        out->append(", ");
        Print(out, n.false_value);
        out->append(")");
        return;
      }
      case ExprKind::kCast: {
        const auto& n = static_cast<const CastNode&>(*e);
        absl::StrAppend(out, DTypeName(n.dtype), "(");
        Print(out, n.value);
        out->append(")");
        return;
      }
      case ExprKind::kCall: {
        const auto& n = static_cast<const CallNode&>(*e);
        absl::StrAppend(out, n.name, "(");
        for (size_t i = 0; i < n.args.size(); ++i) {
          if (i) out->append(", ");
          Print(out, n.args[i]);
        }
        out->append(")");
        return;
      }
      case ExprKind::kLoad: {
        const auto& n = static_cast<const LoadNode&>(*e);
        auto it = buffers_.find(n.buffer.get());
        out->append(it != buffers_.end() ? it->second : n.buffer->name);
        out->append("[");
        for (size_t i = 0; i < n.indices.size(); ++i) {
          if (i) out->append(", ");
          Print(out, n.indices[i]);
        }
        out->append("]");
        return;
      }
    }
  }

 private:
  void PrintOperand(std::string* out, const Expr& e, int min_precedence) const {
    if (Precedence(e) < min_precedence) {
      out->append("(");
      Print(out, e);
      out->append(")");
    } else {
      Print(out, e);
    }
  }

  const std::map<const Buffer*, std::string>& buffers_;
  const std::map<const VarNode*, std::string>& vars_;
};

}  // namespace

std::string CanonicalText(const Workload& w) {
  std::map<const Buffer*, std::string> buffers;
  std::map<std::string, std::string> tensor_names;
  for (size_t i = 0; i < w.tensors.size(); ++i) {
    const std::string name = absl::StrCat("t", i);
    if (w.tensors[i].buffer) buffers[w.tensors[i].buffer.get()] = name;
    tensor_names.emplace(w.tensors[i].name, name);
  }
  std::string out;
  for (size_t i = 0; i < w.tensors.size(); ++i) {
    const TensorDef& t = w.tensors[i];
    absl::StrAppend(&out, "t", i);
    if (t.is_input) {
      out.append(" = input(");
      out.append(t.buffer ? DTypeName(t.buffer->dtype) : "?");
      out.append(", [");
      if (t.buffer) {
        for (size_t d = 0; d < t.buffer->shape.size(); ++d) {
          if (d) out.append(", ");
          absl::StrAppend(&out, t.buffer->shape[d]);
        }
      }
      out.append("])\n");
      continue;
    }
    std::map<const VarNode*, std::string> vars;
    if (!t.axes.empty()) {
      out.append("[");
      for (size_t d = 0; d < t.axes.size(); ++d) {
        const std::string axis = absl::StrCat("a", d);
        vars[t.axes[d].get()] = axis;
        if (d) out.append(", ");
        absl::StrAppend(&out, axis, ": ");
        if (t.buffer && d < t.buffer->shape.size()) {
          absl::StrAppend(&out, t.buffer->shape[d]);
        } else {
          out.append("?");
        }
      }
      out.append("]");
    }
    out.append(" = ");
    if (t.reduce) {
      absl::StrAppend(&out, ReduceOpName(*t.reduce), "(");
      for (size_t r = 0; r < t.reduce_axes.size(); ++r) {
        const std::string axis = absl::StrCat("r", r);
        vars[t.reduce_axes[r].get()] = axis;
        if (r) out.append(", ");
        absl::StrAppend(&out, axis, ": ");
        if (r < t.reduce_extents.size()) {
          absl::StrAppend(&out, t.reduce_extents[r]);
        } else {
          out.append("?");
        }
      }
      out.append(") ");
    }
    CanonicalPrinter(buffers, vars).Print(&out, t.body);
    out.append("\n");
  }
  out.append("output ");
  for (size_t i = 0; i < w.outputs.size(); ++i) {
    if (i) out.append(", ");
    auto it = tensor_names.find(w.outputs[i]);
    out.append(it != tensor_names.end() ? it->second : w.outputs[i]);
  }
  out.append("\n");
  return out;
}

std::string WorkloadKey(const Workload& w) {
  static const char kHex[] = "0123456789abcdef";
  uint64_t h = Fnv1a64(CanonicalText(w));
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i) {
    out[i] = kHex[h & 0xf];
    h >>= 4;
  }
  return out;
}

}  // namespace tessel::schedules
