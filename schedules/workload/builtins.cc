#include "schedules/workload/builtins.h"

#include <cctype>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "schedules/util/check.h"
#include "schedules/util/short_words.h"
#include "schedules/workload/parser.h"

namespace tessel::schedules {
namespace {

// ---------------------------------------------------------------------------------------------
// Parameters

enum class ParamKind : uint8_t {
  kSize,    // integer >= 1
  kCount,   // integer >= 0
  kBool,    // true | false
  kDType,   // f32 | f16 | bf16
  kChoice,  // one of ParamDef::choices
};

struct ParamDef {
  std::string name;
  ParamKind kind;
  std::string default_value;  // empty: required
  std::vector<std::string> choices;
  std::string description;
};

// Parsed parameter values of one spec, normalized ("true", "1024", "f16").
class Args {
 public:
  void Set(const std::string& name, std::string value, int64_t int_value) {
    values_[name] = std::move(value);
    ints_[name] = int_value;
  }
  int64_t Int(const std::string& name) const { return Get(ints_, name); }
  bool Bool(const std::string& name) const { return Get(values_, name) == "true"; }
  std::string Str(const std::string& name) const { return Get(values_, name); }

 private:
  template <typename T>
  static T Get(const std::map<std::string, T>& m, const std::string& name) {
    auto it = m.find(name);
    TESSEL_CHECK(it != m.end()) << "builtin reads undeclared parameter " << name;
    return it->second;
  }
  std::map<std::string, std::string> values_;
  std::map<std::string, int64_t> ints_;
};

using TextFn = absl::StatusOr<std::string> (*)(const Args&);

struct FamilyDef {
  std::string name;
  std::string description;
  std::vector<ParamDef> params;
  TextFn text;
};

// ---------------------------------------------------------------------------------------------
// Text generation

// Writes a definition in the text format, checking each tensor's size as it goes.
class TextWriter {
 public:
  explicit TextWriter(std::string family) : family_(std::move(family)) {}

  void Input(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape) {
    Check(name, shape);
    absl::StrAppend(&text_, name, " = input(", dtype, ", [", absl::StrJoin(shape, ", "), "])\n");
  }
  // A computed tensor `name` of `shape`, defined by the statement `definition`.
  void Compute(const std::string& name, const std::vector<int64_t>& shape,
               const std::string& definition) {
    Check(name, shape);
    absl::StrAppend(&text_, definition, "\n");
  }
  absl::StatusOr<std::string> Finish(const std::string& output) {
    if (!status_.ok()) return status_;
    return absl::StrCat(text_, "output ", output, "\n");
  }

 private:
  void Check(const std::string& name, const std::vector<int64_t>& shape) {
    if (!status_.ok()) return;
    absl::Status s = CheckTensorElements(name, shape);
    if (!s.ok()) status_ = absl::InvalidArgumentError(absl::StrCat(family_, ": ", s.message()));
  }

  std::string family_;
  std::string text_;
  absl::Status status_;
};

// f16 and bf16 accumulate in f32 and cast the result back; f32 needs neither cast.
struct Precision {
  explicit Precision(std::string t) : dtype(std::move(t)), low(dtype != "f32") {}
  std::string Acc(const std::string& e) const { return low ? absl::StrCat("f32(", e, ")") : e; }
  std::string Out(const std::string& e) const { return low ? absl::StrCat(dtype, "(", e, ")") : e; }
  std::string dtype;
  bool low;
};

std::vector<int64_t> Concat(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

absl::StatusOr<std::string> MatmulText(const Args& a) {
  const int64_t m = a.Int("M"), n = a.Int("N"), k = a.Int("K"), batch = a.Int("batch");
  const bool ta = a.Bool("transpose_a"), tb = a.Bool("transpose_b");
  const Precision p(a.Str("dtype"));
  const std::vector<int64_t> lead =
      batch > 1 ? std::vector<int64_t>{batch} : std::vector<int64_t>{};
  const std::string b = batch > 1 ? "b, " : "";
  TextWriter w("matmul");
  w.Input("A", p.dtype, Concat(lead, ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k}));
  w.Input("B", p.dtype, Concat(lead, tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}));
  const std::string read_a = absl::StrCat("A[", b, ta ? "k, m" : "m, k", "]");
  const std::string read_b = absl::StrCat("B[", b, tb ? "n, k" : "k, n", "]");
  const std::vector<int64_t> out_shape = Concat(lead, {m, n});
  w.Compute("C", out_shape,
            absl::StrCat("C[", b, "m, n] = sum(k) ", p.Acc(read_a), " * ", p.Acc(read_b)));
  if (!p.low) return w.Finish("C");
  w.Compute("D", out_shape,
            absl::StrCat("D[", b, "m, n] = ", p.Out(absl::StrCat("C[", b, "m, n]"))));
  return w.Finish("D");
}

absl::StatusOr<std::string> MatmulBiasGeluText(const Args& a) {
  const int64_t m = a.Int("M"), n = a.Int("N"), k = a.Int("K");
  const Precision p(a.Str("dtype"));
  TextWriter w("matmul_bias_gelu");
  w.Input("A", p.dtype, {m, k});
  w.Input("B", p.dtype, {k, n});
  w.Input("bias", p.dtype, {n});
  w.Compute("C", {m, n},
            absl::StrCat("C[m, n] = sum(k) ", p.Acc("A[m, k]"), " * ", p.Acc("B[k, n]")));
  w.Compute(
      "D", {m, n},
      absl::StrCat("D[m, n] = ", p.Out(absl::StrCat("gelu(C[m, n] + ", p.Acc("bias[n]"), ")"))));
  return w.Finish("D");
}

// The output size of a convolution along one dimension, or an error naming the parameters.
absl::StatusOr<int64_t> ConvOutputSize(const std::string& family, const char* what,
                                       const char* unit, const char* out_name, const char* in_name,
                                       int64_t in, const char* filter_name, int64_t filter,
                                       int64_t stride, int64_t padding, int64_t dilation) {
  int64_t padded = 0, span = 0, numerator = 0;
  if (__builtin_mul_overflow(int64_t{2}, padding, &padded) ||
      __builtin_add_overflow(in, padded, &padded) ||
      __builtin_mul_overflow(dilation, filter - 1, &span) ||
      __builtin_sub_overflow(padded, span, &numerator)) {
    return absl::InvalidArgumentError(
        absl::StrCat(family, ": computing the output ", what, " overflows 64-bit integers (",
                     in_name, "=", in, ", ", filter_name, "=", filter, ", padding=", padding,
                     ", dilation=", dilation, "); use realistic sizes"));
  }
  numerator -= 1;
  if (numerator < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        family, ": the output ", what, " ", out_name, " = (", in_name, " + 2*padding - dilation*(",
        filter_name, "-1) - 1)/stride + 1 is not positive for ", in_name, "=", in, ", ",
        filter_name, "=", filter, ", stride=", stride, ", padding=", padding, ", dilation=",
        dilation, ": the dilated filter spans ", span + 1, " ", unit, " but the padded input has ",
        padded, "; increase ", in_name, " or padding, or decrease ", filter_name, " or dilation"));
  }
  return numerator / stride + 1;
}

// "p * 2 + r * 3" (stride 2, dilation 3), "p + r" (1, 1).
std::string ConvIndex(const char* out_axis, int64_t stride, const char* filter_axis,
                      int64_t dilation) {
  std::string s = out_axis;
  if (stride != 1) absl::StrAppend(&s, " * ", stride);
  absl::StrAppend(&s, " + ", filter_axis);
  if (dilation != 1) absl::StrAppend(&s, " * ", dilation);
  return s;
}

absl::StatusOr<std::string> ConvText(const Args& a, const std::string& family, bool bias_relu) {
  const int64_t n = a.Int("N"), c = a.Int("C"), h = a.Int("H"), wd = a.Int("W"), k = a.Int("K"),
                r = a.Int("R"), s = a.Int("S"), stride = a.Int("stride"), pad = a.Int("padding"),
                dil = a.Int("dilation");
  const bool nhwc = a.Str("layout") == "nhwc";
  const Precision p(a.Str("dtype"));
  absl::StatusOr<int64_t> out_h =
      ConvOutputSize(family, "height", "rows", "P", "H", h, "R", r, stride, pad, dil);
  if (!out_h.ok()) return out_h.status();
  absl::StatusOr<int64_t> out_w =
      ConvOutputSize(family, "width", "columns", "Q", "W", wd, "S", s, stride, pad, dil);
  if (!out_w.ok()) return out_w.status();
  const int64_t ph = h + 2 * pad, pw = wd + 2 * pad;  // cannot overflow: checked above

  // Shapes and index lists in the chosen layout: (batch, channel, row, column).
  auto layout = [nhwc](const std::string& b, const std::string& ch, const std::string& row,
                       const std::string& col) {
    return nhwc ? absl::StrCat(b, ", ", row, ", ", col, ", ", ch)
                : absl::StrCat(b, ", ", ch, ", ", row, ", ", col);
  };
  auto shape = [nhwc](int64_t b, int64_t ch, int64_t row, int64_t col) {
    return nhwc ? std::vector<int64_t>{b, row, col, ch} : std::vector<int64_t>{b, ch, row, col};
  };

  TextWriter w(family);
  w.Input("data", p.dtype, shape(n, c, h, wd));
  // Weights: K, C, R, S for nchw; K, R, S, C for nhwc.
  w.Input("weight", p.dtype,
          nhwc ? std::vector<int64_t>{k, r, s, c} : std::vector<int64_t>{k, c, r, s});
  if (bias_relu) w.Input("bias", p.dtype, {k});
  std::string source = "data";
  if (pad > 0) {
    source = "padded";
    const std::string cond =
        absl::StrCat("h >= ", pad, " && h < ", h + pad, " && w >= ", pad, " && w < ", wd + pad);
    w.Compute(
        "padded", shape(n, c, ph, pw),
        absl::StrCat("padded[", layout("n", "c", absl::StrCat("h: ", ph), absl::StrCat("w: ", pw)),
                     "] = select(", cond, ", data[",
                     layout("n", "c", absl::StrCat("h - ", pad), absl::StrCat("w - ", pad)),
                     "], 0.0)"));
  }
  const std::string read_src = absl::StrCat(
      source, "[",
      layout("n", "c", ConvIndex("p", stride, "r", dil), ConvIndex("q", stride, "s", dil)), "]");
  const std::string read_weight = nhwc ? "weight[k, r, s, c]" : "weight[k, c, r, s]";
  const std::string out_axes = layout("n", "k", "p", "q");
  const std::vector<int64_t> out_shape = shape(n, k, *out_h, *out_w);
  w.Compute("conv", out_shape,
            absl::StrCat("conv[",
                         layout("n", "k", absl::StrCat("p: ", *out_h), absl::StrCat("q: ", *out_w)),
                         "] = sum(", nhwc ? "r, s, c" : "c, r, s", ") ", p.Acc(read_src), " * ",
                         p.Acc(read_weight)));
  const std::string read_conv = absl::StrCat("conv[", out_axes, "]");
  if (bias_relu) {
    w.Compute("out", out_shape,
              absl::StrCat("out[", out_axes, "] = ",
                           p.Out(absl::StrCat("relu(", read_conv, " + ", p.Acc("bias[k]"), ")"))));
    return w.Finish("out");
  }
  if (!p.low) return w.Finish("conv");
  w.Compute("out", out_shape, absl::StrCat("out[", out_axes, "] = ", p.Out(read_conv)));
  return w.Finish("out");
}

absl::StatusOr<std::string> Conv2dText(const Args& a) { return ConvText(a, "conv2d", false); }
absl::StatusOr<std::string> Conv2dBiasReluText(const Args& a) {
  return ConvText(a, "conv2d_bias_relu", true);
}

absl::StatusOr<std::string> SoftmaxText(const Args& a) {
  const int64_t rows = a.Int("rows"), cols = a.Int("cols");
  const Precision p(a.Str("dtype"));
  TextWriter w("softmax");
  w.Input("X", p.dtype, {rows, cols});
  w.Compute("row_max", {rows}, absl::StrCat("row_max[i] = max(j) ", p.Acc("X[i, j]")));
  w.Compute("exps", {rows, cols},
            absl::StrCat("exps[i, j] = exp(", p.Acc("X[i, j]"), " - row_max[i])"));
  w.Compute("row_sum", {rows}, "row_sum[i] = sum(j) exps[i, j]");
  w.Compute("Y", {rows, cols}, absl::StrCat("Y[i, j] = ", p.Out("exps[i, j] / row_sum[i]")));
  return w.Finish("Y");
}

absl::StatusOr<std::string> LayernormText(const Args& a) {
  const int64_t rows = a.Int("rows"), cols = a.Int("cols");
  const Precision p(a.Str("dtype"));
  const std::string x = p.Acc("X[i, j]");
  TextWriter w("layernorm");
  w.Input("X", p.dtype, {rows, cols});
  w.Input("weight", p.dtype, {cols});
  w.Input("bias", p.dtype, {cols});
  w.Compute("x_sum", {rows}, absl::StrCat("x_sum[i] = sum(j) ", x));
  w.Compute("mean", {rows}, absl::StrCat("mean[i] = x_sum[i] / ", cols));
  w.Compute("sq_sum", {rows},
            absl::StrCat("sq_sum[i] = sum(j) (", x, " - mean[i]) * (", x, " - mean[i])"));
  w.Compute("var", {rows}, absl::StrCat("var[i] = sq_sum[i] / ", cols));
  w.Compute(
      "Y", {rows, cols},
      absl::StrCat("Y[i, j] = ", p.Out(absl::StrCat("(", x, " - mean[i]) * rsqrt(var[i] + 1e-5) * ",
                                                    p.Acc("weight[j]"), " + ", p.Acc("bias[j]")))));
  return w.Finish("Y");
}

absl::StatusOr<std::string> ReduceText(const Args& a) {
  const int64_t rows = a.Int("rows"), cols = a.Int("cols");
  const std::string op = a.Str("op");
  const Precision p(a.Str("dtype"));
  TextWriter w("reduce");
  w.Input("X", p.dtype, {rows, cols});
  if (op == "max") {  // exact in any dtype: no accumulation type needed
    w.Compute("Y", {rows}, "Y[i] = max(j) X[i, j]");
    return w.Finish("Y");
  }
  if (op == "sum" && !p.low) {
    w.Compute("Y", {rows}, "Y[i] = sum(j) X[i, j]");
    return w.Finish("Y");
  }
  w.Compute("acc", {rows}, absl::StrCat("acc[i] = sum(j) ", p.Acc("X[i, j]")));
  const std::string value = op == "mean" ? absl::StrCat("acc[i] / ", cols) : "acc[i]";
  w.Compute("Y", {rows}, absl::StrCat("Y[i] = ", p.Out(value)));
  return w.Finish("Y");
}

// ---------------------------------------------------------------------------------------------
// The families

ParamDef Size(const char* name, const char* description, const char* default_value = "") {
  return ParamDef{name, ParamKind::kSize, default_value, {}, description};
}
ParamDef DTypeParam() {
  return ParamDef{"dtype",
                  ParamKind::kDType,
                  "f32",
                  {"f32", "f16", "bf16"},
                  "element type: f32, f16 or bf16 (f16 and bf16 accumulate in f32)"};
}

std::vector<ParamDef> ConvParams() {
  return {Size("N", "batch size"),
          Size("C", "input channels"),
          Size("H", "input height"),
          Size("W", "input width"),
          Size("K", "output channels"),
          Size("R", "filter height"),
          Size("S", "filter width"),
          Size("stride", "stride along both spatial dimensions", "1"),
          ParamDef{"padding", ParamKind::kCount, "0", {}, "zero padding on each side"},
          Size("dilation", "filter dilation", "1"),
          ParamDef{"layout",
                   ParamKind::kChoice,
                   "nchw",
                   {"nchw", "nhwc"},
                   "nchw (weights K, C, R, S) or nhwc (weights K, R, S, C)"},
          DTypeParam()};
}

const std::vector<FamilyDef>& Families() {
  static const std::vector<FamilyDef>* const families = new std::vector<FamilyDef>{
      {"matmul",
       "C = A x B, optionally batched and with transposed operands",
       {Size("M", "rows of C"), Size("N", "columns of C"), Size("K", "reduction length"),
        Size("batch", "batch count; > 1 adds a leading batch axis to A, B and C", "1"),
        ParamDef{"transpose_a", ParamKind::kBool, "false", {}, "A is stored [K, M]"},
        ParamDef{"transpose_b", ParamKind::kBool, "false", {}, "B is stored [N, K]"}, DTypeParam()},
       MatmulText},
      {"matmul_bias_gelu",
       "D = gelu(A x B + bias), bias of shape [N]",
       {Size("M", "rows of D"), Size("N", "columns of D"), Size("K", "reduction length"),
        DTypeParam()},
       MatmulBiasGeluText},
      {"conv2d", "2-D convolution, zero padding through a padded-input stage", ConvParams(),
       Conv2dText},
      {"conv2d_bias_relu", "relu(conv2d + bias), bias of shape [K]", ConvParams(),
       Conv2dBiasReluText},
      {"softmax",
       "softmax over the last axis: max, exp(x - max), sum, divide",
       {Size("rows", "rows"), Size("cols", "length of the softmax axis"), DTypeParam()},
       SoftmaxText},
      {"layernorm",
       "layer normalization over the last axis, with weight and bias of shape [cols]",
       {Size("rows", "rows"), Size("cols", "length of the normalized axis"), DTypeParam()},
       LayernormText},
      {"reduce",
       "reduction over the last axis",
       {Size("rows", "rows"), Size("cols", "length of the reduced axis"),
        ParamDef{"op", ParamKind::kChoice, "sum", {"sum", "max", "mean"}, "sum, max or mean"},
        DTypeParam()},
       ReduceText},
  };
  return *families;
}

std::string FamilyNames() {
  std::vector<std::string> names;
  for (const FamilyDef& f : Families()) names.push_back(f.name);
  return absl::StrJoin(names, ", ");
}

std::string ParamNames(const FamilyDef& f) {
  std::vector<std::string> names;
  for (const ParamDef& p : f.params) {
    names.push_back(p.default_value.empty() ? p.name : absl::StrCat(p.name, "=", p.default_value));
  }
  return absl::StrCat(f.name, "(", absl::StrJoin(names, ", "), ")");
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// ---------------------------------------------------------------------------------------------
// Spec syntax: FAMILY [ '(' [NAME '=' VALUE {',' NAME '=' VALUE}] ')' ]

struct SpecCall {
  std::string family;
  std::vector<std::pair<std::string, std::string>> args;
};

const char* const kSpecForm = "write FAMILY(NAME=VALUE, ...), e.g. matmul(M=1024, N=1024, K=1024)";

absl::StatusOr<SpecCall> ParseSpecSyntax(const std::string& spec) {
  size_t i = 0;
  const size_t n = spec.size();
  auto skip_space = [&] {
    while (i < n && std::isspace(static_cast<unsigned char>(spec[i]))) ++i;
  };
  auto is_ident_start = [&](size_t j) {
    return j < n && (std::isalpha(static_cast<unsigned char>(spec[j])) || spec[j] == '_');
  };
  auto ident = [&] {
    size_t start = i;
    while (i < n && (std::isalnum(static_cast<unsigned char>(spec[i])) || spec[i] == '_')) ++i;
    return spec.substr(start, i - start);
  };
  auto error = [&](const std::string& expected) {
    const std::string found =
        i < n ? absl::StrCat("'", spec.substr(i, 1), "'") : std::string("the end of the spec");
    return absl::InvalidArgumentError(absl::StrCat("malformed workload spec '", spec,
                                                   "': expected ", expected, " at column ", i + 1,
                                                   ", found ", found, "; ", kSpecForm));
  };
  SpecCall call;
  skip_space();
  if (i == n) return absl::InvalidArgumentError(absl::StrCat("empty workload spec; ", kSpecForm));
  if (!is_ident_start(i)) return error("a family name such as matmul");
  call.family = ident();
  skip_space();
  if (i == n) return call;
  if (spec[i] != '(') return error(absl::StrCat("'(' after ", call.family));
  ++i;
  skip_space();
  if (i < n && spec[i] == ')') {
    ++i;
  } else {
    while (true) {
      skip_space();
      if (!is_ident_start(i)) return error("a parameter name");
      std::string name = ident();
      skip_space();
      if (i >= n || spec[i] != '=') return error(absl::StrCat("'=' after the parameter ", name));
      ++i;
      skip_space();
      const size_t start = i;
      while (i < n && spec[i] != ',' && spec[i] != ')' && spec[i] != '(' && spec[i] != '=' &&
             !std::isspace(static_cast<unsigned char>(spec[i]))) {
        ++i;
      }
      if (i == start) return error(absl::StrCat("a value for the parameter ", name));
      call.args.emplace_back(std::move(name), spec.substr(start, i - start));
      skip_space();
      if (i < n && spec[i] == ',') {
        ++i;
        continue;
      }
      if (i < n && spec[i] == ')') {
        ++i;
        break;
      }
      return error(absl::StrCat("',' or ')' after the value of ", call.args.back().first));
    }
  }
  skip_space();
  if (i != n) return error("nothing after ')'");
  return call;
}

// Checks and normalizes one value.
absl::Status SetValue(const FamilyDef& f, const ParamDef& p, const std::string& value, Args* args) {
  switch (p.kind) {
    case ParamKind::kSize:
    case ParamKind::kCount: {
      int64_t v = 0;
      auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      const char* what =
          p.kind == ParamKind::kSize ? "a positive integer" : "a non-negative integer";
      if (ec == std::errc::result_out_of_range) {
        return absl::InvalidArgumentError(absl::StrCat("parameter ", p.name, " of ", f.name,
                                                       " must be ", what, ", found '", value,
                                                       "', which does not fit in 64 bits"));
      }
      if (ec != std::errc() || ptr != value.data() + value.size()) {
        return absl::InvalidArgumentError(absl::StrCat("parameter ", p.name, " of ", f.name,
                                                       " must be ", what, ", found '", value, "'"));
      }
      if (v < (p.kind == ParamKind::kSize ? 1 : 0)) {
        return absl::InvalidArgumentError(
            absl::StrCat("parameter ", p.name, " of ", f.name, " must be ", what, ", found ", v));
      }
      args->Set(p.name, absl::StrCat(v), v);
      return absl::OkStatus();
    }
    case ParamKind::kBool: {
      const std::string l = Lower(value);
      if (l == "true" || l == "1") {
        args->Set(p.name, "true", 1);
      } else if (l == "false" || l == "0") {
        args->Set(p.name, "false", 0);
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            "parameter ", p.name, " of ", f.name, " must be true or false, found '", value, "'"));
      }
      return absl::OkStatus();
    }
    case ParamKind::kDType:
    case ParamKind::kChoice: {
      for (const std::string& c : p.choices) {
        if (c == value) {
          args->Set(p.name, value, 0);
          return absl::OkStatus();
        }
      }
      const std::string what = p.kind == ParamKind::kDType ? "unknown dtype" : "invalid " + p.name;
      return absl::InvalidArgumentError(absl::StrCat(what, " '", value, "' for ", f.name,
                                                     "; expected one of ",
                                                     absl::StrJoin(p.choices, ", ")));
    }
  }
  return absl::InternalError("unhandled parameter kind");
}

struct Expansion {
  const FamilyDef* family;
  std::string normalized_spec;
  std::string text;
};

absl::StatusOr<Expansion> Expand(const std::string& spec) {
  absl::StatusOr<SpecCall> call = ParseSpecSyntax(spec);
  if (!call.ok()) return call.status();
  const FamilyDef* family = nullptr;
  for (const FamilyDef& f : Families()) {
    if (f.name == call->family) family = &f;
  }
  if (!family) {
    return absl::InvalidArgumentError(absl::StrCat("unknown workload family '", call->family,
                                                   "'; known families: ", FamilyNames()));
  }
  const FamilyDef& f = *family;
  Args args;
  std::map<std::string, std::string> given;
  for (const auto& [name, value] : call->args) {
    const ParamDef* param = nullptr;
    const ParamDef* near = nullptr;
    for (const ParamDef& p : f.params) {
      if (p.name == name) param = &p;
      if (Lower(p.name) == Lower(name)) near = &p;
    }
    if (!param) {
      const std::string hint = near ? absl::StrCat("did you mean ", near->name, "? ") : "";
      return absl::InvalidArgumentError(absl::StrCat("unknown parameter '", name, "' for ", f.name,
                                                     "; ", hint, "its parameters are ",
                                                     ParamNames(f)));
    }
    if (!given.emplace(name, value).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter ", name, " of ", f.name, " is given twice; give it once"));
    }
    absl::Status s = SetValue(f, *param, value, &args);
    if (!s.ok()) return s;
  }
  std::vector<std::string> normalized;
  for (const ParamDef& p : f.params) {
    if (!given.count(p.name)) {
      if (p.default_value.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("missing parameter ", p.name, " of ", f.name,
                                                       " (", p.description, "); write ",
                                                       ParamNames(f)));
      }
      absl::Status s = SetValue(f, p, p.default_value, &args);
      TESSEL_CHECK(s.ok()) << "bad default for " << f.name << "." << p.name;
    }
    normalized.push_back(absl::StrCat(p.name, "=", args.Str(p.name)));
  }
  absl::StatusOr<std::string> text = f.text(args);
  if (!text.ok()) return text.status();
  return Expansion{&f, absl::StrCat(f.name, "(", absl::StrJoin(normalized, ", "), ")"),
                   *std::move(text)};
}

// A definition has a line with both '=' and '['; a spec is one line, so several lines are read as
// a definition too (which gives better errors than a malformed spec).
bool LooksLikeDefinition(const std::string& s) {
  const size_t last = s.find_last_not_of(" \t\r\n");
  if (last != std::string::npos && s.find('\n') < last) return true;
  std::istringstream in(s);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find('=') != std::string::npos && line.find('[') != std::string::npos) return true;
  }
  return false;
}

absl::StatusOr<Workload> LoadText(const std::string& s) {
  absl::StatusOr<Workload> w = ParseWorkloadText(s);
  if (!w.ok() && !LooksLikeDefinition(s) && s.find('(') == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        w.status().message(), " ('", s,
        "' is neither an existing file nor a definition in the workload text format)"));
  }
  return w;
}

}  // namespace

absl::StatusOr<Workload> ParseWorkloadText(const std::string& text) {
  return LooksLikeDefinition(text) ? ParseWorkload(text) : ParseWorkloadSpec(text);
}

absl::StatusOr<std::string> BuiltinWorkloadText(const std::string& spec) {
  absl::StatusOr<Expansion> e = Expand(spec);
  if (!e.ok()) return e.status();
  return std::move(e->text);
}

absl::StatusOr<Workload> ParseWorkloadSpec(const std::string& spec) {
  absl::StatusOr<Expansion> e = Expand(spec);
  if (!e.ok()) return WithShortWords(e.status());
  absl::StatusOr<Workload> w = ParseWorkload(e->text);
  if (!w.ok()) {
    return absl::InternalError(absl::StrCat(
        "builtin ", e->normalized_spec,
        " generated a definition that does not parse: ", w.status().message(), "\n", e->text));
  }
  w->name = e->family->name;
  w->spec = e->normalized_spec;
  return w;
}

absl::StatusOr<Workload> LoadWorkload(const std::string& spec_or_file) {
  std::error_code ec;
  if (!spec_or_file.empty() && std::filesystem::is_regular_file(spec_or_file, ec)) {
    std::ifstream in(spec_or_file, std::ios::binary);
    std::ostringstream contents;
    contents << in.rdbuf();
    if (!in.good() && !in.eof()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot read the workload file ", spec_or_file, "; check its permissions"));
    }
    absl::StatusOr<Workload> w = LoadText(contents.str());
    if (!w.ok()) {
      return absl::Status(w.status().code(),
                          absl::StrCat(spec_or_file, ": ", w.status().message()));
    }
    return w;
  }
  return LoadText(spec_or_file);
}

std::vector<BuiltinFamily> BuiltinFamilies() {
  std::vector<BuiltinFamily> out;
  for (const FamilyDef& f : Families()) {
    BuiltinFamily b{f.name, f.description, {}};
    for (const ParamDef& p : f.params) b.params.push_back({p.name, p.default_value, p.description});
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace tessel::schedules
