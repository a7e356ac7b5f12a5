#include "schedules/workload/parser.h"

#include <cctype>
#include <charconv>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "schedules/ir/dtype.h"
#include "schedules/ir/expr.h"
#include "schedules/util/check.h"
#include "schedules/util/short_words.h"
#include "schedules/util/status_macros.h"

namespace tessel::schedules {

absl::Status CheckTensorElements(const std::string& tensor, const std::vector<int64_t>& shape) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : shape) {
    if (d <= 0) continue;  // non-positive extents are reported elsewhere
    if (__builtin_mul_overflow(n, d, &n)) {
      overflow = true;
      break;
    }
  }
  const std::string shape_text = absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
  if (overflow) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor ", tensor, " of shape ", shape_text,
        " has more elements than a 64-bit integer can count; a tensor may have at most 2^40 (",
        kMaxTensorElements, ") elements: use smaller sizes"));
  }
  if (n > kMaxTensorElements) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", tensor, " of shape ", shape_text, " has ", n,
                     " elements, more than the limit of 2^40 (", kMaxTensorElements,
                     ") elements per tensor: use smaller sizes"));
  }
  return absl::OkStatus();
}

namespace {

// ---------------------------------------------------------------------------------------------
// Lexer

enum class TokKind : uint8_t { kIdent, kInt, kFloat, kPunct, kSeparator, kEnd };

struct Token {
  TokKind kind = TokKind::kEnd;
  std::string text;  // the lexeme; "\n" or ";" for a separator
  int line = 1;
  int column = 1;
  int64_t int_value = 0;
  double float_value = 0;
};

std::string Where(int line, int column) {
  return absl::StrCat("line ", line, ", column ", column, ": ");
}

absl::Status ErrorAt(const Token& t, const std::string& message) {
  return absl::InvalidArgumentError(Where(t.line, t.column) + message);
}

std::string Describe(const Token& t) {
  switch (t.kind) {
    case TokKind::kSeparator:
      return t.text == ";" ? "';'" : "end of line";
    case TokKind::kEnd:
      return "end of input";
    default:
      return absl::StrCat("'", t.text, "'");
  }
}

bool IsIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Bounds that keep the parser's recursion and the expression trees of hostile input small.
constexpr int kMaxStatementTokens = 10000;
constexpr int kMaxNesting = 200;

// The first word of the next line of `text` after position `i` that holds anything but blanks
// and comments ("" if none or it does not start with a word).
std::string NextLineWord(const std::string& text, size_t i) {
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r')) ++i;
    if (i < text.size() && (text[i] == '\n' || text[i] == '#')) {
      while (i < text.size() && text[i] != '\n') ++i;
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && IsIdentChar(text[j])) ++j;
    return text.substr(i, j - i);
  }
  return "";
}

struct OpenBracket {
  char c;
  int line, column;
};

absl::Status UnclosedBracket(const OpenBracket& b, const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat(Where(b.line, b.column), "unclosed '", std::string(1, b.c), "' (", why,
                   "); close it with '", b.c == '(' ? ")" : "]", "'"));
}

absl::StatusOr<std::vector<Token>> Lex(const std::string& text) {
  std::vector<Token> out;
  int line = 1, column = 1;
  // The open () and [] brackets: newlines inside brackets continue the statement.
  std::vector<OpenBracket> open;
  int statement_tokens = 0;
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    const char c = text[i];
    if (c == '\n') {
      if (!open.empty()) {
        // `output` and `with` only begin statements: the bracket was never closed.
        const std::string next = NextLineWord(text, i + 1);
        if (next == "output" || next == "with") {
          return UnclosedBracket(open.back(), absl::StrCat("the next statement, `", next,
                                                           "`, begins on a later line"));
        }
      }
      if (open.empty()) {
        Token t;
        t.kind = TokKind::kSeparator;
        t.text = "\n";
        t.line = line;
        t.column = column;
        out.push_back(t);
        statement_tokens = 0;
      }
      ++line;
      column = 1;
      ++i;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
      ++column;
      continue;
    }
    if (c == '#') {
      while (i < n && text[i] != '\n') {
        ++i;
        ++column;
      }
      continue;
    }
    Token t;
    t.line = line;
    t.column = column;
    size_t j = i;
    if (IsIdentStart(c)) {
      while (j < n && IsIdentChar(text[j])) ++j;
      t.kind = TokKind::kIdent;
    } else if (IsDigit(c) || (c == '.' && i + 1 < n && IsDigit(text[i + 1]))) {
      bool is_float = false;
      while (j < n && IsDigit(text[j])) ++j;
      if (j < n && text[j] == '.') {
        is_float = true;
        ++j;
        while (j < n && IsDigit(text[j])) ++j;
      }
      if (j < n && (text[j] == 'e' || text[j] == 'E')) {
        size_t k = j + 1;
        if (k < n && (text[k] == '+' || text[k] == '-')) ++k;
        if (k < n && IsDigit(text[k])) {
          is_float = true;
          j = k;
          while (j < n && IsDigit(text[j])) ++j;
        }
      }
      if (j < n && (IsIdentChar(text[j]) || text[j] == '.')) {
        size_t k = j;
        while (k < n && (IsIdentChar(text[k]) || text[k] == '.')) ++k;
        return absl::InvalidArgumentError(
            absl::StrCat(Where(line, column), "malformed number '", text.substr(i, k - i),
                         "'; write an integer such as 12 or a float such as 1.5 or 1e-5"));
      }
      const char* first = text.data() + i;
      const char* last = text.data() + j;
      if (is_float) {
        t.kind = TokKind::kFloat;
        auto [ptr, ec] = std::from_chars(first, last, t.float_value);
        if (ec != std::errc() || ptr != last) {
          return absl::InvalidArgumentError(absl::StrCat(Where(line, column), "float literal ",
                                                         text.substr(i, j - i),
                                                         " is out of the range of a 64-bit float"));
        }
      } else {
        t.kind = TokKind::kInt;
        auto [ptr, ec] = std::from_chars(first, last, t.int_value);
        if (ec != std::errc() || ptr != last) {
          return absl::InvalidArgumentError(absl::StrCat(
              Where(line, column), "integer ", text.substr(i, j - i), " does not fit in 64 bits"));
        }
      }
    } else {
      static const char* const kTwoChar[] = {"<=", ">=", "==", "!=", "&&", "||"};
      t.kind = TokKind::kPunct;
      j = i + 1;
      for (const char* p : kTwoChar) {
        if (i + 1 < n && text[i] == p[0] && text[i + 1] == p[1]) j = i + 2;
      }
      if (j == i + 1) {
        if (c == ';') {
          t.kind = TokKind::kSeparator;
        } else if (c == '&' || c == '|') {
          return absl::InvalidArgumentError(
              absl::StrCat(Where(line, column), "unexpected character '", text.substr(i, 1),
                           "'; did you mean '", text.substr(i, 1), text.substr(i, 1), "'?"));
        } else if (std::string("()[],:=+-*/%<>!").find(c) == std::string::npos) {
          std::string shown;
          if (std::isprint(static_cast<unsigned char>(c))) {
            shown = absl::StrCat("'", text.substr(i, 1), "'");
          } else {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned char>(c));
            shown = buf;
          }
          return absl::InvalidArgumentError(
              absl::StrCat(Where(line, column), "unexpected character ", shown));
        }
        if (c == '(' || c == '[') open.push_back({c, line, column});
        if ((c == ')' || c == ']') && !open.empty()) open.pop_back();
      }
    }
    t.text = text.substr(i, j - i);
    if (t.kind == TokKind::kSeparator) {
      statement_tokens = 0;
    } else if (++statement_tokens > kMaxStatementTokens) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(line, column), "statement too long (more than ", kMaxStatementTokens,
                       " tokens); split it into several definitions"));
    }
    out.push_back(std::move(t));
    column += static_cast<int>(j - i);
    i = j;
  }
  Token end;
  end.kind = TokKind::kEnd;
  end.line = line;
  end.column = column;
  out.push_back(end);
  if (!open.empty()) return UnclosedBracket(open.back(), "the definition ends before it closes");
  return out;
}

// ---------------------------------------------------------------------------------------------
// Parser

bool IsReserved(const std::string& name) {
  return name == "input" || name == "output" || name == "with";
}

const char* const kKnownFunctions =
    "select, min, max, add, mul, exp, log, tanh, sqrt, rsqrt, erf, abs, relu, sigmoid, silu, "
    "gelu, and the casts f32, f16, bf16, f64, i32, i64, bool";

bool IsExpandedFunction(const std::string& name) {
  return name == "relu" || name == "sigmoid" || name == "silu" || name == "gelu";
}

bool IsImm(const Expr& e) { return As<IntImmNode>(e) || As<FloatImmNode>(e); }

// Whether the immediate `e` may silently take type `t`.
bool CanRetype(const Expr& e, DType t) {
  if (const auto* i = As<IntImmNode>(e))
    return i->dtype != DType::kBool && (IsInt(t) || IsFloat(t));
  if (As<FloatImmNode>(e)) return IsFloat(t);
  return false;
}

// A literal of the default type (i64 integer, f32 float) adapts to the other operand first.
bool HasDefaultLiteralType(const Expr& e) {
  if (As<IntImmNode>(e)) return e->dtype == kIndexType;
  if (As<FloatImmNode>(e)) return e->dtype == DType::kFloat32;
  return false;
}

std::string Shorten(const Expr& e) {
  std::string s = ToString(e);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

// Where an axis appears alone as an index of a tensor of known shape.
struct AxisUse {
  int64_t extent;
  std::string tensor;
  size_t dim;
  int line;
  int column;
};

struct AxisInfo {
  Token token;  // where the axis is declared
  VarPtr var;
  bool reduce = false;
  std::optional<int64_t> explicit_extent;
  std::vector<AxisUse> uses;
  int64_t extent = 0;
};

struct DefContext {
  std::string tensor;
  std::vector<AxisInfo> axes;  // spatial axes, then reduction axes

  AxisInfo* Find(const std::string& name) {
    for (AxisInfo& a : axes) {
      if (a.token.text == name) return &a;
    }
    return nullptr;
  }
  const AxisInfo* Find(const std::string& name) const {
    return const_cast<DefContext*>(this)->Find(name);
  }
  std::string SpatialNames() const {
    std::vector<std::string> names;
    for (const AxisInfo& a : axes) {
      if (!a.reduce) names.push_back(a.token.text);
    }
    return absl::StrJoin(names, ", ");
  }
};

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  absl::StatusOr<Workload> Parse() {
    TESSEL_RETURN_IF_ERROR(ScanSizeParameters());
    while (true) {
      while (Peek().kind == TokKind::kSeparator) ++pos_;
      if (Peek().kind == TokKind::kEnd) break;
      TESSEL_RETURN_IF_ERROR(ParseStatement());
    }
    if (outputs_.empty()) {
      return ErrorAt(Peek(),
                     "expected an `output NAME` statement naming the tensors the "
                     "workload produces, found end of input");
    }
    for (const Token& o : outputs_) {
      auto it = tensors_.find(o.text);
      if (it == tensors_.end()) {
        return ErrorAt(
            o, absl::StrCat("output ", o.text,
                            " is not a tensor of this workload; its tensors are ", TensorList()));
      }
      if (w_.tensors[it->second].is_input) {
        return ErrorAt(
            o, absl::StrCat("output ", o.text, " is an input; outputs must be computed tensors"));
      }
      w_.outputs.push_back(o.text);
    }
    w_.name = "custom";
    TESSEL_RETURN_IF_ERROR(ValidateWorkload(w_));
    return std::move(w_);
  }

 private:
  struct SizeParam {
    int64_t value;
    Token token;
  };

  // ---- Tokens

  const Token& Peek(size_t ahead = 0) const {
    size_t p = pos_ + ahead;
    return p < toks_.size() ? toks_[p] : toks_.back();
  }
  const Token& Next() {
    const Token& t = Peek();
    if (pos_ < toks_.size() - 1) ++pos_;
    return t;
  }
  static bool IsPunct(const Token& t, const char* p) {
    return t.kind == TokKind::kPunct && t.text == p;
  }
  static bool IsIdent(const Token& t, const char* name) {
    return t.kind == TokKind::kIdent && t.text == name;
  }
  static bool EndsStatement(const Token& t) {
    return t.kind == TokKind::kSeparator || t.kind == TokKind::kEnd;
  }
  // Consumes punctuation `p` or fails with "expected 'p' <context>, found X".
  absl::Status Expect(const char* p, const std::string& context) {
    if (!IsPunct(Peek(), p)) {
      return ErrorAt(Peek(),
                     absl::StrCat("expected '", p, "' ", context, ", found ", Describe(Peek())));
    }
    Next();
    return absl::OkStatus();
  }

  std::string TensorList() const {
    if (order_.empty()) return "(none yet)";
    return absl::StrJoin(order_, ", ");
  }

  // ---- Statements

  // `with NAME = INT, ...` may come anywhere, so size parameters are bound before anything else.
  absl::Status ScanSizeParameters() {
    int depth = 0;
    for (size_t i = 0; i < toks_.size(); ++i) {
      const Token& t = toks_[i];
      if (IsPunct(t, "(") || IsPunct(t, "[")) ++depth;
      if ((IsPunct(t, ")") || IsPunct(t, "]")) && depth > 0) --depth;
      if (depth == 0 && IsIdent(t, "with")) {
        pos_ = i;
        TESSEL_RETURN_IF_ERROR(ParseWith(/*record=*/true));
        i = pos_ - 1;
      }
    }
    pos_ = 0;
    return absl::OkStatus();
  }

  absl::Status ParseWith(bool record) {
    Next();  // with
    const char* after = "after 'with'";
    while (true) {
      const Token& name = Next();
      if (name.kind != TokKind::kIdent || IsReserved(name.text)) {
        return ErrorAt(name, absl::StrCat("expected a size parameter name ", after, ", found ",
                                          Describe(name)));
      }
      if (!IsPunct(Peek(), "=")) {
        return ErrorAt(Peek(), absl::StrCat("expected '=' after the size parameter ", name.text,
                                            ", found ", Describe(Peek())));
      }
      Next();
      bool negative = false;
      if (IsPunct(Peek(), "-")) {
        negative = true;
        Next();
      }
      const Token& value = Next();
      if (value.kind != TokKind::kInt) {
        return ErrorAt(value, absl::StrCat("expected an integer value for the size parameter ",
                                           name.text, ", found ", Describe(value)));
      }
      if (record) {
        auto it = params_.find(name.text);
        if (it != params_.end()) {
          return ErrorAt(
              name, absl::StrCat("size parameter ", name.text, " is bound twice (first at line ",
                                 it->second.token.line, "); bind it once"));
        }
        params_[name.text] = SizeParam{negative ? -value.int_value : value.int_value, name};
      }
      if (!IsPunct(Peek(), ",")) return absl::OkStatus();
      Next();
      after = "after ','";
    }
  }

  absl::Status EndStatement(const std::string& context) {
    const Token& t = Peek();
    if (t.kind == TokKind::kSeparator) {
      Next();
      return absl::OkStatus();
    }
    if (t.kind == TokKind::kEnd || IsIdent(t, "with")) return absl::OkStatus();
    return ErrorAt(
        t, absl::StrCat("expected end of line or ';' after ", context, ", found ", Describe(t)));
  }

  absl::Status ParseStatement() {
    const Token& t = Peek();
    if (t.kind != TokKind::kIdent) {
      return ErrorAt(t, absl::StrCat("expected a statement (NAME = input(DTYPE, [DIMS]), "
                                     "NAME[AXES] = EXPR, output NAME or with NAME = INTEGER), "
                                     "found ",
                                     Describe(t)));
    }
    if (t.text == "with") {
      TESSEL_RETURN_IF_ERROR(ParseWith(/*record=*/false));
      return EndStatement("the with clause");
    }
    if (t.text == "output" && !IsPunct(Peek(1), "=") && !IsPunct(Peek(1), "[")) {
      Next();
      TESSEL_RETURN_IF_ERROR(ParseOutputs());
      return EndStatement("the output statement");
    }
    const Token& name = t;
    TESSEL_RETURN_IF_ERROR(ParseDefinition());
    return EndStatement(absl::StrCat("the definition of ", name.text));
  }

  absl::Status ParseOutputs() {
    const char* after = "after 'output'";
    while (true) {
      const Token& name = Next();
      if (name.kind != TokKind::kIdent) {
        return ErrorAt(name,
                       absl::StrCat("expected a tensor name ", after, ", found ", Describe(name)));
      }
      for (const Token& o : outputs_) {
        if (o.text == name.text) {
          return ErrorAt(
              name, absl::StrCat(name.text, " is listed as an output twice (first at line ", o.line,
                                 ")"));
        }
      }
      outputs_.push_back(name);
      if (!IsPunct(Peek(), ",")) return absl::OkStatus();
      Next();
      after = "after ','";
    }
  }

  // Names of tensors and axes must not be reserved words or size parameters.
  absl::Status CheckNewName(const Token& t, const char* what) {
    if (IsReserved(t.text)) {
      return ErrorAt(t, absl::StrCat("'", t.text, "' is a reserved word and cannot name a ", what,
                                     "; choose another name"));
    }
    auto it = params_.find(t.text);
    if (it != params_.end()) {
      return ErrorAt(
          t, absl::StrCat(what, " ", t.text, " has the same name as the size parameter ", t.text,
                          " (bound at line ", it->second.token.line, "); rename one of them"));
    }
    return absl::OkStatus();
  }

  absl::Status CheckNewAxis(const Token& t, const DefContext& def, bool reduce) {
    const char* what = reduce ? "reduction axis" : "axis";
    TESSEL_RETURN_IF_ERROR(CheckNewName(t, what));
    if (tensors_.count(t.text) || t.text == def.tensor) {
      return ErrorAt(
          t, absl::StrCat(what, " ", t.text, " of ", def.tensor,
                          " has the same name as the tensor ", t.text, "; rename the axis"));
    }
    if (const AxisInfo* other = def.Find(t.text)) {
      if (reduce && !other->reduce) {
        return ErrorAt(t, absl::StrCat("reduction axis ", t.text, " of ", def.tensor,
                                       " is already a spatial axis of ", def.tensor,
                                       "; give the reduction axis its own name"));
      }
      return ErrorAt(t, absl::StrCat("axis ", t.text, " appears twice in the definition of ",
                                     def.tensor, "; give each axis its own name"));
    }
    return absl::OkStatus();
  }

  absl::Status ParseDefinition() {
    const Token& name = Next();
    TESSEL_RETURN_IF_ERROR(CheckNewName(name, "tensor"));
    auto it = tensors_.find(name.text);
    if (it != tensors_.end()) {
      return ErrorAt(name, absl::StrCat("tensor ", name.text, " is already defined at line ",
                                        lines_[name.text], "; give each tensor its own name"));
    }
    DefContext def;
    def.tensor = name.text;
    if (IsPunct(Peek(), "[")) {
      Next();
      if (!IsPunct(Peek(), "]")) {
        while (true) {
          const Token& ax = Next();
          if (ax.kind != TokKind::kIdent) {
            return ErrorAt(ax, absl::StrCat("expected an axis name in the axis list of ", name.text,
                                            ", found ", Describe(ax)));
          }
          TESSEL_RETURN_IF_ERROR(CheckNewAxis(ax, def, /*reduce=*/false));
          AxisInfo info;
          info.token = ax;
          info.var = MakeVar(ax.text, kIndexType);
          if (IsPunct(Peek(), ":")) {
            Next();
            TESSEL_ASSIGN_OR_RETURN(info.explicit_extent,
                                    ParseExtent(absl::StrCat("the extent of axis ", ax.text)));
          }
          def.axes.push_back(std::move(info));
          if (IsPunct(Peek(), ",")) {
            Next();
            continue;
          }
          if (IsPunct(Peek(), "]")) break;
          return ErrorAt(Peek(), absl::StrCat("expected ',' or ']' in the axis list of ", name.text,
                                              ", found ", Describe(Peek())));
        }
      }
      Next();  // ]
      TESSEL_RETURN_IF_ERROR(Expect("=", absl::StrCat("after the axis list of ", name.text)));
      if (IsIdent(Peek(), "input")) {
        return ErrorAt(Peek(), absl::StrCat("an input takes its shape from input(DTYPE, [DIMS]); "
                                            "write ",
                                            name.text, " = input(...) without an axis list"));
      }
    } else if (IsPunct(Peek(), "=")) {
      Next();
      if (IsIdent(Peek(), "input")) return ParseInput(name);
    } else {
      return ErrorAt(Peek(), absl::StrCat("expected '[' (an axis list) or '=' after the tensor "
                                          "name ",
                                          name.text, ", found ", Describe(Peek())));
    }
    return ParseCompute(name, std::move(def));
  }

  absl::Status ParseInput(const Token& name) {
    Next();  // input
    TESSEL_RETURN_IF_ERROR(Expect("(", "after 'input'"));
    const Token& dt = Next();
    std::optional<DType> dtype;
    if (dt.kind == TokKind::kIdent) dtype = ParseDType(dt.text);
    if (!dtype) {
      return ErrorAt(dt, absl::StrCat("unknown dtype ", Describe(dt), " for input ", name.text,
                                      "; expected one of f32, f16, bf16, f64, i32, i64, bool"));
    }
    TESSEL_RETURN_IF_ERROR(Expect(",", absl::StrCat("after the dtype of ", name.text)));
    TESSEL_RETURN_IF_ERROR(Expect("[", absl::StrCat("to start the shape of ", name.text)));
    std::vector<int64_t> shape;
    if (!IsPunct(Peek(), "]")) {
      while (true) {
        TESSEL_ASSIGN_OR_RETURN(
            int64_t d, ParseExtent(absl::StrCat("dimension ", shape.size(), " of ", name.text)));
        shape.push_back(d);
        if (IsPunct(Peek(), ",")) {
          Next();
          continue;
        }
        if (IsPunct(Peek(), "]")) break;
        return ErrorAt(Peek(), absl::StrCat("expected ',' or ']' in the shape of ", name.text,
                                            ", found ", Describe(Peek())));
      }
    }
    Next();  // ]
    TESSEL_RETURN_IF_ERROR(Expect(")", absl::StrCat("after the shape of ", name.text)));
    if (absl::Status s = CheckTensorElements(name.text, shape); !s.ok()) {
      return ErrorAt(name, std::string(s.message()));
    }
    TensorDef t;
    t.name = name.text;
    t.is_input = true;
    t.buffer = MakeBuffer(name.text, *dtype, std::move(shape));
    AddTensor(name, std::move(t));
    return absl::OkStatus();
  }

  void AddTensor(const Token& name, TensorDef t) {
    tensors_[name.text] = w_.tensors.size();
    lines_[name.text] = name.line;
    order_.push_back(name.text);
    w_.tensors.push_back(std::move(t));
  }

  // A constant integer (numbers and size parameters), positive.
  absl::StatusOr<int64_t> ParseExtent(const std::string& what) {
    const Token& start = Peek();
    DefContext* saved = def_;
    def_ = nullptr;
    absl::StatusOr<Expr> e = ParseExpr();
    def_ = saved;
    if (!e.ok()) return e.status();
    int64_t v = 0;
    if (!IsConstInt(*e, &v)) {
      return ErrorAt(start, absl::StrCat(what,
                                         " must be a constant integer (numbers and size "
                                         "parameters), found ",
                                         Shorten(*e)));
    }
    if (v <= 0) {
      return ErrorAt(start, absl::StrCat(what, " is ", v, "; extents must be positive"));
    }
    return v;
  }

  // At `sum(`, `max(` or `min(`: whether the parenthesised list is a list of reduction axes
  // (names with optional `: EXTENT`). `sum(` always is at the head of a body. For max and min,
  // which are also the binary functions, the list is a reduction when it has one entry, carries
  // an extent, or (at the head of a body) names only new names.
  bool LooksLikeReduction(bool at_head) const {
    const Token& fn = Peek();
    if (at_head && fn.text == "sum") return true;
    size_t i = 2;
    int entries = 0;
    bool any_extent = false, all_fresh = true;
    if (IsPunct(Peek(i), ")")) return fn.text == "sum";
    while (true) {
      const Token& name = Peek(i);
      if (name.kind != TokKind::kIdent) return false;
      const bool known =
          (def_ && def_->Find(name.text)) || params_.count(name.text) || tensors_.count(name.text);
      all_fresh = all_fresh && !known;
      ++entries;
      ++i;
      if (IsPunct(Peek(i), ":")) {
        any_extent = true;
        int depth = 0;
        for (++i;; ++i) {
          const Token& t = Peek(i);
          if (EndsStatement(t)) return false;
          if (IsPunct(t, "(") || IsPunct(t, "[")) ++depth;
          if (depth == 0 && (IsPunct(t, ",") || IsPunct(t, ")"))) break;
          if (IsPunct(t, ")") || IsPunct(t, "]")) --depth;
        }
      }
      if (IsPunct(Peek(i), ",")) {
        ++i;
        continue;
      }
      if (IsPunct(Peek(i), ")")) break;
      return false;
    }
    return entries == 1 || any_extent || (at_head && all_fresh);
  }

  absl::Status ParseCompute(const Token& name, DefContext def) {
    def_ = &def;
    std::optional<ReduceOp> reduce;
    const Token& head = Peek();
    if (head.kind == TokKind::kIdent &&
        (head.text == "sum" || head.text == "max" || head.text == "min") && IsPunct(Peek(1), "(") &&
        LooksLikeReduction(/*at_head=*/true)) {
      reduce = head.text == "sum"   ? ReduceOp::kSum
               : head.text == "max" ? ReduceOp::kMax
                                    : ReduceOp::kMin;
      Next();
      Next();  // (
      if (IsPunct(Peek(), ")")) {
        return ErrorAt(Peek(),
                       absl::StrCat(head.text, "() needs at least one reduction axis, as in ",
                                    head.text, "(k)"));
      }
      while (true) {
        const Token& ax = Next();
        if (ax.kind != TokKind::kIdent) {
          return ErrorAt(ax, absl::StrCat("expected a reduction axis name in ", head.text,
                                          "(...), found ", Describe(ax)));
        }
        if (IsPunct(Peek(), "[") || IsPunct(Peek(), "(")) {
          return ErrorAt(ax, absl::StrCat("expected a reduction axis name in ", head.text,
                                          "(...), found an expression; the reduced expression "
                                          "follows the axes, as in ",
                                          head.text, "(k) A[m, k]"));
        }
        TESSEL_RETURN_IF_ERROR(CheckNewAxis(ax, def, /*reduce=*/true));
        AxisInfo info;
        info.token = ax;
        info.reduce = true;
        info.var = MakeVar(ax.text, kIndexType);
        if (IsPunct(Peek(), ":")) {
          Next();
          TESSEL_ASSIGN_OR_RETURN(
              info.explicit_extent,
              ParseExtent(absl::StrCat("the extent of reduction axis ", ax.text)));
        }
        def.axes.push_back(std::move(info));
        if (IsPunct(Peek(), ",")) {
          Next();
          continue;
        }
        if (IsPunct(Peek(), ")")) break;
        return ErrorAt(Peek(), absl::StrCat("expected ',' or ')' in the reduction axes of ",
                                            name.text, ", found ", Describe(Peek())));
      }
      Next();  // )
      if (EndsStatement(Peek())) {
        return ErrorAt(Peek(), absl::StrCat("expected the body of the reduction ", head.text,
                                            "(...) of ", name.text, ", found ", Describe(Peek())));
      }
    }
    TESSEL_ASSIGN_OR_RETURN(Expr body, ParseExpr());
    def_ = nullptr;

    if (reduce && (body->dtype == DType::kBool)) {
      return ErrorAt(head, absl::StrCat("cannot reduce a bool body with ", head.text,
                                        "; cast it, e.g. f32(...) or i64(...)"));
    }
    // Extents: explicit, or inferred from the places where an axis indexes a dimension alone.
    for (AxisInfo& a : def.axes) {
      const std::string where = a.reduce ? absl::StrCat(head.text, "(...)")
                                         : absl::StrCat("the axis list of ", name.text);
      if (a.explicit_extent) {
        for (const AxisUse& u : a.uses) {
          if (u.extent < *a.explicit_extent) {
            return absl::InvalidArgumentError(absl::StrCat(
                Where(u.line, u.column), "axis ", a.token.text, " of ", name.text, " has extent ",
                *a.explicit_extent, " but indexes dimension ", u.dim, " of ", u.tensor,
                ", which has extent ", u.extent, "; make the extent at most ", u.extent));
          }
        }
        a.extent = *a.explicit_extent;
        continue;
      }
      if (a.uses.empty()) {
        return ErrorAt(a.token, absl::StrCat("cannot infer the extent of axis ", a.token.text,
                                             " of ", name.text,
                                             ": it never indexes a tensor dimension alone; "
                                             "write `",
                                             a.token.text, ": EXTENT` in ", where));
      }
      const AxisUse& first = a.uses.front();
      for (const AxisUse& u : a.uses) {
        if (u.extent != first.extent) {
          return absl::InvalidArgumentError(
              absl::StrCat(Where(u.line, u.column), "conflicting extents for axis ", a.token.text,
                           " of ", name.text, ": ", first.extent, " from dimension ", first.dim,
                           " of ", first.tensor, " (line ", first.line, ", column ", first.column,
                           ") but ", u.extent, " from dimension ", u.dim, " of ", u.tensor,
                           "; write `", a.token.text, ": EXTENT` in ", where, " to choose one"));
        }
      }
      a.extent = first.extent;
    }

    TensorDef t;
    t.name = name.text;
    std::vector<int64_t> shape;
    for (const AxisInfo& a : def.axes) {
      if (a.reduce) {
        t.reduce_axes.push_back(a.var);
        t.reduce_extents.push_back(a.extent);
      } else {
        t.axes.push_back(a.var);
        shape.push_back(a.extent);
      }
    }
    if (absl::Status s = CheckTensorElements(name.text, shape); !s.ok()) {
      return ErrorAt(name, std::string(s.message()));
    }
    t.reduce = reduce;
    t.buffer = MakeBuffer(name.text, body->dtype, std::move(shape));
    t.body = std::move(body);
    AddTensor(name, std::move(t));
    return absl::OkStatus();
  }

  // ---- Expressions (precedence from low to high: || && ==,!= <,<=,>,>= +,- *,/,% unary)

  absl::StatusOr<Expr> ParseExpr() { return ParseLevel(0); }

  static std::optional<BinaryOp> OperatorAt(const Token& t, int level) {
    if (t.kind != TokKind::kPunct) return std::nullopt;
    const std::string& s = t.text;
    switch (level) {
      case 0:
        if (s == "||") return BinaryOp::kOr;
        break;
      case 1:
        if (s == "&&") return BinaryOp::kAnd;
        break;
      case 2:
        if (s == "==") return BinaryOp::kEq;
        if (s == "!=") return BinaryOp::kNe;
        break;
      case 3:
        if (s == "<") return BinaryOp::kLt;
        if (s == "<=") return BinaryOp::kLe;
        if (s == ">") return BinaryOp::kGt;
        if (s == ">=") return BinaryOp::kGe;
        break;
      case 4:
        if (s == "+") return BinaryOp::kAdd;
        if (s == "-") return BinaryOp::kSub;
        break;
      case 5:
        if (s == "*") return BinaryOp::kMul;
        if (s == "/") return BinaryOp::kDiv;
        if (s == "%") return BinaryOp::kMod;
        break;
      default:
        break;
    }
    return std::nullopt;
  }

  absl::StatusOr<Expr> ParseLevel(int level) {
    if (level == 6) return ParseUnary();
    TESSEL_ASSIGN_OR_RETURN(Expr lhs, ParseLevel(level + 1));
    while (true) {
      std::optional<BinaryOp> op = OperatorAt(Peek(), level);
      if (!op) return lhs;
      const Token& op_tok = Next();
      TESSEL_ASSIGN_OR_RETURN(Expr rhs, ParseLevel(level + 1));
      TESSEL_ASSIGN_OR_RETURN(lhs, Binary(*op, std::move(lhs), std::move(rhs), op_tok,
                                          absl::StrCat("operands of '", op_tok.text, "'")));
    }
  }

  absl::StatusOr<Expr> ParseUnary() {
    // Every nested parenthesis, call, index list and unary operator passes through here.
    struct NestingGuard {
      explicit NestingGuard(int* d) : depth(d) { ++*depth; }
      ~NestingGuard() { --*depth; }
      int* depth;
    } guard(&nesting_);
    if (nesting_ > kMaxNesting) {
      return ErrorAt(Peek(), absl::StrCat("expression nested more than ", kMaxNesting,
                                          " levels deep; define intermediate tensors"));
    }
    if (IsPunct(Peek(), "-")) {
      const Token& op = Next();
      TESSEL_ASSIGN_OR_RETURN(Expr x, ParseUnary());
      if (x->dtype == DType::kBool) {
        return ErrorAt(
            op, absl::StrCat("cannot negate the bool ", Shorten(x), "; use '!' for logical not"));
      }
      return MakeUnary(UnaryOp::kNeg, std::move(x));
    }
    if (IsPunct(Peek(), "!")) {
      const Token& op = Next();
      TESSEL_ASSIGN_OR_RETURN(Expr x, ParseUnary());
      if (x->dtype != DType::kBool) {
        return ErrorAt(op, absl::StrCat("'!' needs a bool operand (a comparison), found ",
                                        DTypeName(x->dtype), " ", Shorten(x)));
      }
      return MakeUnary(UnaryOp::kNot, std::move(x));
    }
    return ParsePrimary();
  }

  absl::StatusOr<Expr> ParsePrimary() {
    const Token& t = Peek();
    switch (t.kind) {
      case TokKind::kInt:
        Next();
        return MakeInt(t.int_value, kIndexType);
      case TokKind::kFloat:
        Next();
        return MakeFloat(t.float_value, DType::kFloat32);
      case TokKind::kIdent:
        if (IsPunct(Peek(1), "[")) return ParseRead();
        if (IsPunct(Peek(1), "(")) return ParseCall();
        return ParseName();
      default:
        break;
    }
    if (IsPunct(t, "(")) {
      Next();
      TESSEL_ASSIGN_OR_RETURN(Expr e, ParseExpr());
      TESSEL_RETURN_IF_ERROR(
          Expect(")", absl::StrCat("to close the '(' at line ", t.line, ", column ", t.column)));
      return e;
    }
    return ErrorAt(t, absl::StrCat("expected an expression, found ", Describe(t)));
  }

  absl::StatusOr<Expr> ParseName() {
    const Token& t = Next();
    if (def_) {
      if (AxisInfo* a = def_->Find(t.text)) return Expr(a->var);
    }
    auto p = params_.find(t.text);
    if (p != params_.end()) return MakeInt(p->second.value, kIndexType);
    auto it = tensors_.find(t.text);
    if (!def_) {
      if (it != tensors_.end()) {
        return ErrorAt(t, absl::StrCat(t.text,
                                       " is a tensor; dimensions and extents are "
                                       "numbers or size parameters"));
      }
      return ErrorAt(t, absl::StrCat("size parameter ", t.text, " is not bound; add `with ", t.text,
                                     " = INTEGER`"));
    }
    if (it != tensors_.end()) {
      const BufferPtr& buffer = w_.tensors[it->second].buffer;
      if (!buffer->shape.empty()) {
        return ErrorAt(t, absl::StrCat(t.text, " has rank ", buffer->shape.size(),
                                       " but is indexed with 0 indices; write ", t.text,
                                       "[...] with ", buffer->shape.size(), " indices"));
      }
      return MakeLoad(buffer, {});
    }
    const std::string axes = def_->SpatialNames();
    return ErrorAt(t, absl::StrCat("unknown name ", t.text, " in the definition of ", def_->tensor,
                                   ": not an axis of ", def_->tensor,
                                   axes.empty() ? " (it has none)" : " (" + axes + ")",
                                   ", a tensor or a size parameter; bind size parameters with "
                                   "`with ",
                                   t.text, " = INTEGER`"));
  }

  absl::StatusOr<Expr> ParseRead() {
    const Token& name = Next();
    Next();  // [
    if (!def_) {
      return ErrorAt(name, absl::StrCat("a tensor read (", name.text,
                                        "[...]) cannot appear in a dimension or an extent; use "
                                        "numbers and size parameters"));
    }
    auto it = tensors_.find(name.text);
    if (it == tensors_.end()) {
      if (def_->Find(name.text)) {
        return ErrorAt(name, absl::StrCat(name.text, " is an axis of ", def_->tensor,
                                          ", not a tensor; only tensors can be indexed"));
      }
      if (params_.count(name.text)) {
        return ErrorAt(name, absl::StrCat(name.text,
                                          " is a size parameter, not a tensor; only tensors can "
                                          "be indexed"));
      }
      if (name.text == def_->tensor) {
        return ErrorAt(name, absl::StrCat(name.text,
                                          " reads itself; a tensor can only read "
                                          "tensors defined before it"));
      }
      return ErrorAt(name, absl::StrCat("unknown tensor ", name.text,
                                        "; tensors must be defined before they are read "
                                        "(defined so far: ",
                                        TensorList(), ")"));
    }
    const BufferPtr buffer = w_.tensors[it->second].buffer;
    std::vector<Expr> indices;
    if (!IsPunct(Peek(), "]")) {
      while (true) {
        const size_t dim = indices.size();
        const Token& idx_tok = Peek();
        AxisInfo* bare = nullptr;
        if (idx_tok.kind == TokKind::kIdent && (IsPunct(Peek(1), ",") || IsPunct(Peek(1), "]"))) {
          bare = def_->Find(idx_tok.text);
        }
        TESSEL_ASSIGN_OR_RETURN(Expr e, ParseExpr());
        if (!IsInt(e->dtype)) {
          return ErrorAt(idx_tok, absl::StrCat("index ", dim, " of ", name.text, " is the ",
                                               DTypeName(e->dtype), " ", Shorten(e),
                                               "; indices must be integers, e.g. an axis or "
                                               "i64(...)"));
        }
        if (e->dtype != kIndexType) {
          return ErrorAt(idx_tok,
                         absl::StrCat("index ", dim, " of ", name.text, " has type ",
                                      DTypeName(e->dtype), "; indices are ", DTypeName(kIndexType),
                                      ": write ", DTypeName(kIndexType), "(", Shorten(e), ")"));
        }
        if (bare && dim < buffer->shape.size()) {
          bare->uses.push_back(
              AxisUse{buffer->shape[dim], name.text, dim, idx_tok.line, idx_tok.column});
        }
        indices.push_back(std::move(e));
        if (IsPunct(Peek(), ",")) {
          Next();
          continue;
        }
        if (IsPunct(Peek(), "]")) break;
        return ErrorAt(Peek(), absl::StrCat("expected ',' or ']' after index ", dim, " of ",
                                            name.text, ", found ", Describe(Peek())));
      }
    }
    Next();  // ]
    if (indices.size() != buffer->shape.size()) {
      return ErrorAt(name, absl::StrCat(name.text, " has rank ", buffer->shape.size(),
                                        " but is indexed with ", indices.size(), " indices"));
    }
    return MakeLoad(buffer, std::move(indices));
  }

  // Gives a literal operand the type of the other one, or fails naming both types.
  absl::Status Unify(Expr* a, Expr* b, const Token& at, const std::string& what) {
    if ((*a)->dtype == (*b)->dtype) return absl::OkStatus();
    const bool retype_b = IsImm(*b) && CanRetype(*b, (*a)->dtype);
    const bool retype_a = IsImm(*a) && CanRetype(*a, (*b)->dtype);
    if (retype_a && retype_b) {
      if (HasDefaultLiteralType(*b)) {
        *b = MakeCast((*a)->dtype, *b);
      } else {
        *a = MakeCast((*b)->dtype, *a);
      }
      return absl::OkStatus();
    }
    if (retype_b) {
      *b = MakeCast((*a)->dtype, *b);
      return absl::OkStatus();
    }
    if (retype_a) {
      *a = MakeCast((*b)->dtype, *a);
      return absl::OkStatus();
    }
    const DType ta = (*a)->dtype, tb = (*b)->dtype;
    std::string fix;
    if (IsFloat(ta) && IsFloat(tb)) {
      // Suggest the wider type (f32 for f16 with bf16).
      DType wide = DTypeBytes(ta) > DTypeBytes(tb) ? ta : tb;
      if (DTypeBytes(ta) == DTypeBytes(tb)) wide = DType::kFloat32;
      const Expr& narrow = wide == ta ? *b : *a;
      fix = absl::StrCat("cast one of them, e.g. ", DTypeName(wide), "(", Shorten(narrow), ")");
    } else if (IsFloat(ta) != IsFloat(tb) && tb != DType::kBool && ta != DType::kBool) {
      const Expr& integer = IsFloat(ta) ? *b : *a;
      const DType ft = IsFloat(ta) ? ta : tb;
      fix = absl::StrCat("cast the integer, e.g. ", DTypeName(ft), "(", Shorten(integer), ")");
    } else {
      fix = "cast one of them, e.g. i64(...) or f32(...)";
    }
    return ErrorAt(at,
                   absl::StrCat(what, " have different types: ", DTypeName(ta), " (", Shorten(*a),
                                ") and ", DTypeName(tb), " (", Shorten(*b), "); ", fix));
  }

  absl::StatusOr<Expr> Binary(BinaryOp op, Expr a, Expr b, const Token& at,
                              const std::string& what) {
    const bool logical = op == BinaryOp::kAnd || op == BinaryOp::kOr;
    const std::string name = absl::StrCat("'", BinaryOpName(op), "'");
    if (logical) {
      for (const Expr* e : {&a, &b}) {
        if ((*e)->dtype != DType::kBool) {
          return ErrorAt(
              at, absl::StrCat("the operands of ", name, " must be bool (comparisons), found ",
                               DTypeName((*e)->dtype), " (", Shorten(*e), ")"));
        }
      }
    }
    TESSEL_RETURN_IF_ERROR(Unify(&a, &b, at, what));
    const DType t = a->dtype;
    if (!logical && t == DType::kBool && op != BinaryOp::kEq && op != BinaryOp::kNe) {
      return ErrorAt(at, absl::StrCat(name, " cannot be applied to bool operands (", Shorten(a),
                                      "); use select(cond, a, b) or a cast such as f32(...)"));
    }
    if (op == BinaryOp::kMod && IsFloat(t)) {
      return ErrorAt(at, absl::StrCat("'%' needs integer operands, found ", DTypeName(t), " (",
                                      Shorten(a), ")"));
    }
    int64_t divisor = 1;
    if ((op == BinaryOp::kDiv || op == BinaryOp::kMod) && IsInt(t) && IsConstInt(b, &divisor) &&
        divisor == 0) {
      return ErrorAt(at, absl::StrCat("integer division by zero in ", Shorten(a), " ",
                                      BinaryOpName(op), " 0"));
    }
    return MakeBinary(op, std::move(a), std::move(b));
  }

  absl::StatusOr<Expr> ParseCall() {
    const Token& fn = Peek();
    const std::string& name = fn.text;
    const bool is_cast = ParseDType(name).has_value();
    const bool known = is_cast || IsMathIntrinsic(name) || IsExpandedFunction(name) ||
                       name == "select" || name == "min" || name == "max" || name == "add" ||
                       name == "mul" || name == "sum";
    if (!known) {
      if (tensors_.count(name)) {
        return ErrorAt(
            fn, absl::StrCat(name, " is a tensor; read it with square brackets: ", name, "[...]"));
      }
      if (name == "input") {
        return ErrorAt(fn, "input(...) declares a tensor on its own: NAME = input(DTYPE, [DIMS])");
      }
      return ErrorAt(
          fn, absl::StrCat("unknown function ", name, "; known functions: ", kKnownFunctions));
    }
    if (name == "sum" || ((name == "max" || name == "min") && LooksLikeReduction(false))) {
      return ErrorAt(fn, absl::StrCat(name,
                                      "(AXES) is a reduction and can only start the body of "
                                      "a definition, as in C[m] = ",
                                      name,
                                      "(k) A[m, k]; define the reduction as its own tensor "
                                      "and read it here"));
    }
    Next();
    Next();  // (
    std::vector<Expr> args;
    if (!IsPunct(Peek(), ")")) {
      while (true) {
        TESSEL_ASSIGN_OR_RETURN(Expr e, ParseExpr());
        args.push_back(std::move(e));
        if (IsPunct(Peek(), ",")) {
          Next();
          continue;
        }
        if (IsPunct(Peek(), ")")) break;
        return ErrorAt(Peek(), absl::StrCat("expected ',' or ')' after argument ", args.size(),
                                            " of ", name, ", found ", Describe(Peek())));
      }
    }
    Next();  // )
    const size_t arity = name == "select"                                                     ? 3
                         : (name == "min" || name == "max" || name == "add" || name == "mul") ? 2
                                                                                              : 1;
    if (args.size() != arity) {
      std::string hint;
      if (name == "min" || name == "max") {
        hint = absl::StrCat("; a reduction is written ", name,
                            "(AXES) BODY at the start of a definition's body");
      }
      return ErrorAt(fn,
                     absl::StrCat(name, " takes ", arity, arity == 1 ? " argument" : " arguments",
                                  " but is given ", args.size(), hint));
    }
    if (is_cast) return MakeCast(*ParseDType(name), args[0]);
    if (name == "select") {
      if (args[0]->dtype != DType::kBool) {
        return ErrorAt(fn, absl::StrCat("the condition of select must be bool (a comparison), "
                                        "found ",
                                        DTypeName(args[0]->dtype), " (", Shorten(args[0]), ")"));
      }
      TESSEL_RETURN_IF_ERROR(Unify(&args[1], &args[2], fn, "the branches of select"));
      return MakeSelect(args[0], args[1], args[2]);
    }
    if (name == "min" || name == "max" || name == "add" || name == "mul") {
      const BinaryOp op = name == "min"   ? BinaryOp::kMin
                          : name == "max" ? BinaryOp::kMax
                          : name == "add" ? BinaryOp::kAdd
                                          : BinaryOp::kMul;
      return Binary(op, args[0], args[1], fn, absl::StrCat("the arguments of ", name));
    }
    Expr x = args[0];
    if (name == "relu") {
      if (x->dtype == DType::kBool) {
        return ErrorAt(fn, absl::StrCat("relu needs a number, found the bool ", Shorten(x)));
      }
      return MakeMax(x, MakeCast(x->dtype, MakeInt(0)));
    }
    if (As<IntImmNode>(x) && x->dtype != DType::kBool) x = MakeCast(DType::kFloat32, x);
    if (!IsFloat(x->dtype)) {
      return ErrorAt(fn, absl::StrCat(name, " needs a floating-point argument, found the ",
                                      DTypeName(x->dtype), " ", Shorten(x), "; cast it, e.g. ",
                                      name, "(f32(", Shorten(x), "))"));
    }
    const DType t = x->dtype;
    if (IsMathIntrinsic(name)) return MakeCall(name, {x}, t);
    auto sigmoid = [t](const Expr& v) {
      return MakeFloat(1.0, t) /
             (MakeFloat(1.0, t) + MakeCall("exp", {MakeUnary(UnaryOp::kNeg, v)}, t));
    };
    if (name == "sigmoid") return sigmoid(x);
    if (name == "silu") return x * sigmoid(x);
    // gelu(x) = 0.5 * x * (1 + erf(x / sqrt(2)))
    TESSEL_CHECK(name == "gelu") << "unhandled function " << name;
    return MakeFloat(0.5, t) * x *
           (MakeFloat(1.0, t) + MakeCall("erf", {x * MakeFloat(0.70710678118654752, t)}, t));
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  std::map<std::string, SizeParam> params_;
  std::map<std::string, size_t> tensors_;  // name -> index in w_.tensors
  std::map<std::string, int> lines_;       // name -> line of its definition
  std::vector<std::string> order_;         // tensor names in definition order
  std::vector<Token> outputs_;
  DefContext* def_ = nullptr;  // the definition being parsed; nullptr in constants
  int nesting_ = 0;            // depth of ParseUnary calls
  Workload w_;
};

}  // namespace

absl::StatusOr<Workload> ParseWorkload(const std::string& text) {
  absl::StatusOr<std::vector<Token>> tokens = Lex(text);
  if (!tokens.ok()) return WithShortWords(tokens.status());
  Parser parser(*std::move(tokens));
  absl::StatusOr<Workload> w = parser.Parse();
  if (!w.ok()) return WithShortWords(w.status());
  w->spec = text;
  return w;
}

}  // namespace tessel::schedules
