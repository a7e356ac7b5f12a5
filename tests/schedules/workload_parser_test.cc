#include "schedules/workload/parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "schedules/ir/expr.h"
#include "schedules/target/target.h"
#include "schedules/util/short_words.h"
#include "schedules/workload/builtins.h"

namespace tessel::schedules {
namespace {

using ::testing::HasSubstr;

const char kGemmBiasGelu[] = R"(# GEMM + bias + GELU
A = input(f32, [M, K])
B = input(f32, [K, N])
bias = input(f32, [N])
C[m, n] = sum(k) A[m, k] * B[k, n]
D[m, n] = gelu(C[m, n] + bias[n])
output D
with M = 1024, N = 1024, K = 512
)";

Workload MustParse(const std::string& text) {
  absl::StatusOr<Workload> w = ParseWorkload(text);
  EXPECT_TRUE(w.ok()) << w.status().message() << "\n" << text;
  return w.ok() ? *std::move(w) : Workload{};
}

std::string Body(const Workload& w, const std::string& tensor) {
  const TensorDef* t = w.Find(tensor);
  return t && t->body ? ToString(t->body) : "<none>";
}

TEST(WorkloadParser, ParsesGemmBiasGelu) {
  Workload w = MustParse(kGemmBiasGelu);
  EXPECT_EQ(w.name, "custom");
  EXPECT_EQ(w.spec, kGemmBiasGelu);
  ASSERT_EQ(w.tensors.size(), 5u);
  EXPECT_EQ(w.outputs, std::vector<std::string>{"D"});

  const TensorDef& a = w.tensors[0];
  EXPECT_EQ(a.name, "A");
  EXPECT_TRUE(a.is_input);
  EXPECT_EQ(a.buffer->shape, (std::vector<int64_t>{1024, 512}));
  EXPECT_EQ(a.buffer->dtype, DType::kFloat32);
  EXPECT_EQ(a.buffer->scope, MemScope::kGlobal);
  EXPECT_EQ(w.tensors[2].buffer->shape, (std::vector<int64_t>{1024}));

  const TensorDef& c = w.tensors[3];
  EXPECT_FALSE(c.is_input);
  EXPECT_EQ(c.buffer->shape, (std::vector<int64_t>{1024, 1024}));
  ASSERT_EQ(c.axes.size(), 2u);
  EXPECT_EQ(c.axes[0]->name, "m");
  EXPECT_EQ(c.axes[0]->dtype, kIndexType);
  ASSERT_EQ(c.reduce_axes.size(), 1u);
  EXPECT_EQ(c.reduce_axes[0]->name, "k");
  EXPECT_EQ(c.reduce_extents, (std::vector<int64_t>{512}));
  ASSERT_TRUE(c.reduce.has_value());
  EXPECT_EQ(*c.reduce, ReduceOp::kSum);
  EXPECT_EQ(ToString(c.body), "A[m, k] * B[k, n]");
  // The body reads the inputs' own buffers.
  const auto* mul = As<BinaryNode>(c.body);
  ASSERT_NE(mul, nullptr);
  ASSERT_NE(As<LoadNode>(mul->a), nullptr);
  EXPECT_EQ(As<LoadNode>(mul->a)->buffer, a.buffer);

  const TensorDef& d = w.tensors[4];
  EXPECT_FALSE(d.reduce.has_value());
  EXPECT_EQ(d.buffer->dtype, DType::kFloat32);
  EXPECT_EQ(ToString(d.body),
            "0.5 * (C[m, n] + bias[n]) * (1.0 + erf((C[m, n] + bias[n]) * 0.707106781))");
  EXPECT_TRUE(ValidateWorkload(w).ok());
}

TEST(WorkloadParser, MixedPrecisionWithSemicolonsAndTrailingWith) {
  Workload w = MustParse(
      "A = input(f16, [M, K]); B = input(f16, [K, N]); bias = input(f16, [N])\n"
      "C[m, n] = sum(k) f32(A[m, k]) * f32(B[k, n])\n"
      "D[m, n] = f16(gelu(C[m, n] + f32(bias[n])))\n"
      "output D   with M = 64, N = 32, K = 16\n");
  ASSERT_EQ(w.tensors.size(), 5u);
  EXPECT_EQ(w.Find("A")->buffer->dtype, DType::kFloat16);
  EXPECT_EQ(w.Find("C")->buffer->dtype, DType::kFloat32);
  EXPECT_EQ(w.Find("C")->reduce_extents, (std::vector<int64_t>{16}));
  EXPECT_EQ(w.Find("D")->buffer->dtype, DType::kFloat16);
  EXPECT_EQ(w.Find("D")->buffer->shape, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(Body(w, "C"), "f32(A[m, k]) * f32(B[k, n])");
}

TEST(WorkloadParser, WithClauseMayComeFirstAndSizesMayBeExpressions) {
  Workload w = MustParse(
      "with N = 8, P = 2\n"
      "X = input(f32, [N * P + 1, 2])\n"
      "Y[i, j] = X[i, j] / N\n"
      "output Y\n");
  EXPECT_EQ(w.Find("X")->buffer->shape, (std::vector<int64_t>{17, 2}));
  // A size parameter in an expression is an integer constant that takes the float type.
  EXPECT_EQ(Body(w, "Y"), "X[i, j] / 8.0");
}

TEST(WorkloadParser, ExplicitExtents) {
  Workload w = MustParse(
      "X = input(f32, [4, 64])\n"
      "T[n, p: 55] = sum(r: 10) X[n, p + r]\n"
      "Z[i: 3, j: 5] = 0.0\n"
      "output T, Z\n");
  const TensorDef* t = w.Find("T");
  EXPECT_EQ(t->buffer->shape, (std::vector<int64_t>{4, 55}));
  EXPECT_EQ(t->reduce_extents, (std::vector<int64_t>{10}));
  EXPECT_EQ(w.Find("Z")->buffer->shape, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(w.outputs, (std::vector<std::string>{"T", "Z"}));
  // An explicit extent smaller than the dimension it indexes is a slice.
  Workload s = MustParse("X = input(f32, [8])\nY[i: 4] = X[i]\noutput Y\n");
  EXPECT_EQ(s.Find("Y")->buffer->shape, (std::vector<int64_t>{4}));
}

TEST(WorkloadParser, ReductionsAndTwoArgumentMinMax) {
  Workload w = MustParse(
      "X = input(f32, [4, 8])\n"
      "mx[i] = max(j) X[i, j]\n"
      "mn[i] = min(j: 8) X[i, j]\n"
      "r[i, j] = max(X[i, j], 0.0)\n"
      "ij[i: 4, j: 8] = max(i, j) - min(i, j)\n"
      "max[i] = max(j) -X[i, j]\n"
      "output mx, mn, r, ij, max\n");
  EXPECT_EQ(*w.Find("mx")->reduce, ReduceOp::kMax);
  EXPECT_EQ(*w.Find("mn")->reduce, ReduceOp::kMin);
  EXPECT_FALSE(w.Find("r")->reduce.has_value());
  EXPECT_EQ(Body(w, "r"), "max(X[i, j], 0.0)");
  EXPECT_FALSE(w.Find("ij")->reduce.has_value());
  EXPECT_EQ(w.Find("ij")->buffer->dtype, DType::kInt64);
  EXPECT_EQ(Body(w, "ij"), "max(i, j) - min(i, j)");
  EXPECT_EQ(*w.Find("max")->reduce, ReduceOp::kMax);
  EXPECT_EQ(Body(w, "max"), "-X[i, j]");
}

TEST(WorkloadParser, OperatorsPrecedenceAndFloorSemantics) {
  Workload w = MustParse(
      "X = input(f32, [8])\nI = input(i64, [8])\n"
      "a[i] = X[i] + X[i] * 2.0 - X[i] / 4.0\n"
      "b[i] = (X[i] + 1) * -X[i]\n"
      "c[i] = I[i] / 2 + I[i] % 3\n"
      "d[i] = select(i < 2 || i >= 6 && !(i == 7), X[i], 0.0)\n"
      "e[i] = X[i] != 0.0 && i <= 3 || X[i] > 1.5\n"
      "f[i: -7 / 2 + 8] = X[i]\n"
      "g[i: -7 % 3] = X[i]\n"
      "h[i] = add(X[i], mul(X[i], 3))\n"
      "output a, b, c, d, e, f, g, h\n");
  EXPECT_EQ(Body(w, "a"), "X[i] + X[i] * 2.0 - X[i] / 4.0");
  EXPECT_EQ(Body(w, "b"), "(X[i] + 1.0) * -X[i]");
  EXPECT_EQ(Body(w, "c"), "I[i] / 2 + I[i] % 3");
  EXPECT_EQ(Body(w, "d"), "select(i < 2 || i >= 6 && !(i == 7), X[i], 0.0)");
  EXPECT_EQ(w.Find("e")->buffer->dtype, DType::kBool);
  EXPECT_EQ(Body(w, "e"), "X[i] != 0.0 && i <= 3 || X[i] > 1.5");
  EXPECT_EQ(w.Find("f")->buffer->shape, (std::vector<int64_t>{4}));  // floor(-7 / 2) = -4
  EXPECT_EQ(w.Find("g")->buffer->shape, (std::vector<int64_t>{2}));  // -7 mod 3 = 2
  EXPECT_EQ(Body(w, "h"), "X[i] + X[i] * 3.0");
}

TEST(WorkloadParser, LiteralsTakeTheOtherOperandsType) {
  Workload w = MustParse(
      "X = input(f16, [8])\nJ = input(i32, [8])\n"
      "a[i] = X[i] * 0.5 + 1\n"
      "b[i] = J[i] + 1\n"
      "c[i: 2] = 1.5\n"
      "d[i: 2] = 7\n"
      "e[i: 2] = 2 * 0.25\n"
      "output a, b, c, d, e\n");
  EXPECT_EQ(w.Find("a")->buffer->dtype, DType::kFloat16);
  EXPECT_EQ(Body(w, "a"), "X[i] * 0.5f16 + 1.0f16");
  EXPECT_EQ(w.Find("b")->buffer->dtype, DType::kInt32);
  EXPECT_EQ(w.Find("c")->buffer->dtype, DType::kFloat32);
  EXPECT_EQ(w.Find("d")->buffer->dtype, DType::kInt64);
  EXPECT_EQ(w.Find("e")->buffer->dtype, DType::kFloat32);
}

TEST(WorkloadParser, FunctionsAndCasts) {
  Workload w = MustParse(
      "X = input(f32, [8])\n"
      "a[i] = exp(X[i]) + log(X[i]) + tanh(X[i]) + sqrt(X[i]) + rsqrt(X[i]) + erf(X[i]) + "
      "abs(X[i])\n"
      "r[i] = relu(X[i])\n"
      "s[i] = sigmoid(X[i])\n"
      "t[i] = silu(X[i])\n"
      "u[i] = bf16(X[i])\n"
      "v[i] = i32(X[i]) + i32(i)\n"
      "w[i] = f64(X[i])\n"
      "output a, r, s, t, u, v, w\n");
  const auto* call = As<CallNode>(As<BinaryNode>(w.Find("a")->body)->b);
  ASSERT_NE(call, nullptr);
  EXPECT_EQ(call->name, "abs");
  EXPECT_EQ(Body(w, "a"),
            "exp(X[i]) + log(X[i]) + tanh(X[i]) + sqrt(X[i]) + rsqrt(X[i]) + erf(X[i]) + "
            "abs(X[i])");
  EXPECT_EQ(Body(w, "r"), "max(X[i], 0.0)");
  EXPECT_EQ(Body(w, "s"), "1.0 / (1.0 + exp(-X[i]))");
  EXPECT_EQ(Body(w, "t"), "X[i] * (1.0 / (1.0 + exp(-X[i])))");
  EXPECT_EQ(w.Find("u")->buffer->dtype, DType::kBFloat16);
  EXPECT_EQ(w.Find("v")->buffer->dtype, DType::kInt32);
  EXPECT_EQ(w.Find("w")->buffer->dtype, DType::kFloat64);
}

TEST(WorkloadParser, CommentsBlankLinesAndContinuationInsideBrackets) {
  Workload w = MustParse(
      "\n  # leading comment\n\n"
      "A = input(f32, [4,   # rows\n"
      "                8])  # columns\n"
      "S[i] = sum(j) (A[i, j] *\n"
      "  2.0)\n"
      "\t\r\n"
      "output S;\n");
  EXPECT_EQ(w.Find("A")->buffer->shape, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(Body(w, "S"), "A[i, j] * 2.0");
  // Outside brackets a line ends the statement, even after an operator.
  EXPECT_FALSE(ParseWorkload("A = input(f32, [4])\nS[i] = A[i] *\n  2.0\noutput S\n").ok());
}

TEST(WorkloadParser, RankZeroTensors) {
  Workload w = MustParse(
      "X = input(f32, [16])\n"
      "s = sum(i) X[i]\n"
      "Y[i] = X[i] / s\n"
      "Z[i] = X[i] / s[]\n"
      "c = input(f32, [])\n"
      "W[i] = X[i] * c\n"
      "output Y, Z, W\n");
  EXPECT_TRUE(w.Find("s")->buffer->shape.empty());
  EXPECT_EQ(w.Find("s")->reduce_extents, (std::vector<int64_t>{16}));
  EXPECT_EQ(Body(w, "Y"), "X[i] / s[]");
  EXPECT_EQ(Body(w, "Z"), "X[i] / s[]");
  EXPECT_EQ(Body(w, "W"), "X[i] * c[]");
}

TEST(WorkloadParser, OutputMayComeBeforeTheDefinition) {
  Workload w = MustParse("output Y\nX = input(f32, [4])\nY[i] = X[i] + 1.0\n");
  EXPECT_EQ(w.outputs, std::vector<std::string>{"Y"});
}

TEST(WorkloadParser, IndexExpressionsAndGather) {
  Workload w = MustParse(
      "X = input(f32, [10, 4])\nidx = input(i64, [3])\n"
      "G[i, j] = X[idx[i], j]\n"
      "S[i: 5, j] = X[2 * i + 1, j]\n"
      "output G, S\n");
  EXPECT_EQ(w.Find("G")->buffer->shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(Body(w, "S"), "X[2 * i + 1, j]");
}

TEST(WorkloadParser, RejectsHostileNestingAndLength) {
  const std::string deep = absl::StrCat("A = input(f32, [4])\nC[m] = ", std::string(300, '('),
                                        "A[m]", std::string(300, ')'), "\noutput C\n");
  absl::StatusOr<Workload> w = ParseWorkload(deep);
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(std::string(w.status().message()),
              HasSubstr("line 2, column 208: expression nested more than 200 levels deep; "
                        "define intermediate tensors"));

  std::string longest = "A = input(f32, [4])\nC[m] = A[m]";
  for (int i = 0; i < 2000; ++i) longest.append(" + A[m]");
  longest.append("\noutput C\n");
  absl::StatusOr<Workload> l = ParseWorkload(longest);
  ASSERT_FALSE(l.ok());
  EXPECT_THAT(std::string(l.status().message()),
              HasSubstr("statement too long (more than 10000 tokens); split it into several "
                        "definitions"));
  // Many statements of moderate length are fine.
  std::string many = "A = input(f32, [4])\nC0[m] = A[m]\n";
  for (int i = 1; i < 300; ++i) {
    absl::StrAppend(&many, "C", i, "[m] = C", i - 1, "[m] * 2.0 + A[m]\n");
  }
  many.append("output C299\n");
  EXPECT_TRUE(ParseWorkload(many).ok());
}

TEST(WorkloadParser, CheckTensorElements) {
  EXPECT_TRUE(CheckTensorElements("A", {1 << 20, 1 << 20}).ok());
  absl::Status big = CheckTensorElements("A", {1 << 20, (1 << 20) + 1});
  EXPECT_THAT(std::string(big.message()),
              HasSubstr("tensor A of shape [1048576, 1048577] has 1099512676352 elements, more "
                        "than the limit of 2^40 (1099511627776)"));
  absl::Status overflow = CheckTensorElements("B", {int64_t{1} << 40, int64_t{1} << 40});
  EXPECT_THAT(std::string(overflow.message()),
              HasSubstr("tensor B of shape [1099511627776, 1099511627776] has more elements "
                        "than a 64-bit integer can count"));
}

// ---- Errors: every user-facing message, with its position.

struct ErrorCase {
  const char* name;
  const char* text;
  const char* message;  // a substring of the error
};

class WorkloadParserErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(WorkloadParserErrorTest, Reports) {
  const ErrorCase& c = GetParam();
  absl::StatusOr<Workload> w = ParseWorkload(c.text);
  ASSERT_FALSE(w.ok()) << c.text;
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(w.status().message()), HasSubstr(c.message)) << c.text;
}

const ErrorCase kErrors[] = {
    // Syntax.
    {"MissingBracket", "A = input(f32, [4, 4])\nC[m, n] = A[m n]\noutput C\n",
     "line 2, column 15: expected ',' or ']' after index 0 of A, found 'n'"},
    {"MissingCloseParen", "A = input(f32, [4])\nC[m] = (A[m] + 1.0\noutput C\n",
     "line 2, column 8: unclosed '(' (the next statement, `output`, begins on a later line); "
     "close it with ')'"},
    // An unclosed bracket would make the newlines after it continue the statement: the `with`
    // that binds M was swallowed, and M was reported unbound (issue 20).
    {"UnclosedShapeBeforeWith", "A = input(f32, [M, 4]\nC[m] = A[m, 0]\noutput C\nwith M = 4\n",
     "line 1, column 10: unclosed '(' (the next statement, `output`, begins on a later line); "
     "close it with ')'"},
    {"TrailingJunk", "A = input(f32, [4])\nC[m] = A[m])\noutput C\n",
     "line 2, column 12: expected end of line or ';' after the definition of C, found ')'"},
    {"NotAStatement", "A = input(f32, [4])\n(C) = A\n",
     "line 2, column 1: expected a statement (NAME = input(DTYPE, [DIMS]), NAME[AXES] = EXPR, "
     "output NAME or with NAME = INTEGER), found '('"},
    {"MissingEquals", "A = input(f32, [4])\nC[m] A[m]\noutput C\n",
     "line 2, column 6: expected '=' after the axis list of C, found 'A'"},
    {"MissingAxisListOrEquals", "A input(f32, [4])\n",
     "line 1, column 3: expected '[' (an axis list) or '=' after the tensor name A, found 'input'"},
    {"BadAxisName", "A = input(f32, [4])\nC[m, 2] = A[m]\noutput C\n",
     "line 2, column 6: expected an axis name in the axis list of C, found '2'"},
    {"BadAxisListSeparator", "A = input(f32, [4])\nC[m n] = A[m]\noutput C\n",
     "line 2, column 5: expected ',' or ']' in the axis list of C, found 'n'"},
    {"ExpectedExpression", "A = input(f32, [4])\nC[m] = A[m] +\noutput C\n",
     "line 2, column 14: expected an expression, found end of line"},
    {"UnexpectedCharacter", "A = input(f32, [4])\nC[m] = A[m] $ 2\n",
     "line 2, column 13: unexpected character '$'"},
    {"SingleAmpersand", "A = input(f32, [4])\nC[m] = m < 1 & m > 2\n",
     "line 2, column 14: unexpected character '&'; did you mean '&&'?"},
    {"MalformedNumber", "A = input(f32, [4])\nC[m] = A[m] * 12ab\n",
     "line 2, column 15: malformed number '12ab'"},
    {"IntegerTooLarge", "A = input(f32, [99999999999999999999])\n",
     "line 1, column 17: integer 99999999999999999999 does not fit in 64 bits"},
    {"FloatOutOfRange", "A = input(f32, [4])\nC[m] = A[m] * 1e999\n",
     "line 2, column 15: float literal 1e999 is out of the range of a 64-bit float"},
    // Inputs.
    {"UnknownDType", "A = input(f33, [4])\n",
     "line 1, column 11: unknown dtype 'f33' for input A; expected one of f32, f16, bf16, f64, "
     "i32, i64, bool"},
    {"InputMissingParen", "A = input f32\n", "line 1, column 11: expected '(' after 'input'"},
    {"InputMissingComma", "A = input(f32 [4])\n",
     "line 1, column 15: expected ',' after the dtype of A, found '['"},
    {"InputMissingShape", "A = input(f32, 4)\n",
     "line 1, column 16: expected '[' to start the shape of A, found '4'"},
    {"InputBadShapeSeparator", "A = input(f32, [4 4])\n",
     "line 1, column 19: expected ',' or ']' in the shape of A, found '4'"},
    {"InputMissingCloseParen", "A = input(f32, [4]\n",
     "line 1, column 10: unclosed '(' (the definition ends before it closes); close it with ')'"},
    {"InputWithAxisList", "A[i] = input(f32, [4])\n",
     "line 1, column 8: an input takes its shape from input(DTYPE, [DIMS]); write A = input(...) "
     "without an axis list"},
    {"NonPositiveDimension", "A = input(f32, [4, 0])\n",
     "line 1, column 20: dimension 1 of A is 0; extents must be positive"},
    {"NonConstantDimension", "A = input(f32, [4])\nB = input(f32, [exp(1.0)])\n",
     "line 2, column 17: dimension 0 of B must be a constant integer (numbers and size "
     "parameters), found exp(1.0)"},
    {"TensorInDimension", "A = input(f32, [4])\nB = input(f32, [A])\n",
     "line 2, column 17: A is a tensor; dimensions and extents are numbers or size parameters"},
    {"TensorReadInDimension", "A = input(i64, [4])\nB = input(f32, [A[0]])\n",
     "line 2, column 17: a tensor read (A[...]) cannot appear in a dimension or an extent"},
    {"TensorTooLarge", "A = input(f32, [1048576, 2097152])\n",
     "line 1, column 1: tensor A of shape [1048576, 2097152] has 2199023255552 elements, more "
     "than the limit of 2^40 (1099511627776) elements per tensor"},
    {"TensorElementCountOverflows",
     "A = input(f32, [4])\nC[i: 4294967296, j: 4294967296, k: 4294967296] = A[0]\noutput C\n",
     "line 2, column 1: tensor C of shape [4294967296, 4294967296, 4294967296] has more elements "
     "than a 64-bit integer can count"},
    // Size parameters.
    {"UnboundSizeParameter", "A = input(f32, [M, 4])\n",
     "line 1, column 17: size parameter M is not bound; add `with M = INTEGER`"},
    {"SizeParameterBoundTwice", "with M = 4\nA = input(f32, [M])\nwith M = 8\n",
     "line 3, column 6: size parameter M is bound twice (first at line 1); bind it once"},
    {"SizeParameterWithoutValue", "A = input(f32, [M])\nwith M = K\n",
     "line 2, column 10: expected an integer value for the size parameter M, found 'K'"},
    {"SizeParameterWithoutEquals", "with M 4\n",
     "line 1, column 8: expected '=' after the size parameter M, found '4'"},
    {"SizeParameterWithoutName", "with = 4\n",
     "line 1, column 6: expected a size parameter name after 'with', found '='"},
    {"WithClauseTrailingJunk", "A = input(f32, [M])\nC[i] = A[i]\noutput C\nwith M = 4 N = 5\n",
     "line 4, column 12: expected end of line or ';' after the with clause, found 'N'"},
    // Names.
    {"DuplicateDefinition", "A = input(f32, [4])\nA = input(f32, [8])\n",
     "line 2, column 1: tensor A is already defined at line 1; give each tensor its own name"},
    {"ReservedWordAsTensor", "output = input(f32, [4])\n",
     "line 1, column 1: 'output' is a reserved word and cannot name a tensor"},
    {"TensorNamedLikeSizeParameter", "A = input(f32, [M])\nM = input(f32, [4])\nwith M = 4\n",
     "line 2, column 1: tensor M has the same name as the size parameter M (bound at line 3); "
     "rename one of them"},
    {"AxisNamedLikeSizeParameter", "A = input(f32, [M])\nC[M] = A[0]\noutput C\nwith M = 4\n",
     "line 2, column 3: axis M has the same name as the size parameter M (bound at line 4)"},
    {"AxisNamedLikeTensor", "A = input(f32, [4])\nC[A] = 1.0\noutput C\n",
     "line 2, column 3: axis A of C has the same name as the tensor A; rename the axis"},
    {"DuplicateAxis", "A = input(f32, [4, 4])\nC[i, i] = A[i, i]\noutput C\n",
     "line 2, column 6: axis i appears twice in the definition of C; give each axis its own name"},
    {"ReductionAxisIsSpatialAxis", "A = input(f32, [4, 4])\nC[i] = sum(i) A[i, i]\noutput C\n",
     "line 2, column 12: reduction axis i of C is already a spatial axis of C; give the "
     "reduction axis its own name"},
    {"UnknownTensor", "A = input(f32, [4])\nC[m] = A[m] + Z[m]\noutput C\n",
     "line 2, column 15: unknown tensor Z; tensors must be defined before they are read (defined "
     "so far: A)"},
    {"TensorReadsItself", "A = input(f32, [4])\nC[m] = C[m] + A[m]\noutput C\n",
     "line 2, column 8: C reads itself; a tensor can only read tensors defined before it"},
    {"IndexingAnAxis", "A = input(f32, [4])\nC[m] = m[0] + A[m]\noutput C\n",
     "line 2, column 8: m is an axis of C, not a tensor; only tensors can be indexed"},
    {"IndexingASizeParameter", "A = input(f32, [M])\nC[m] = M[0] + A[m]\noutput C\nwith M = 4\n",
     "line 2, column 8: M is a size parameter, not a tensor; only tensors can be indexed"},
    {"UnknownName", "A = input(f32, [4])\nC[m] = A[m] * q\noutput C\n",
     "line 2, column 15: unknown name q in the definition of C: not an axis of C (m), a tensor "
     "or a size parameter; bind size parameters with `with q = INTEGER`"},
    {"CallingATensor", "A = input(f32, [4])\nC[m] = A(m)\noutput C\n",
     "line 2, column 8: A is a tensor; read it with square brackets: A[...]"},
    {"UnknownFunction", "A = input(f32, [4])\nC[m] = foo(A[m])\noutput C\n",
     "line 2, column 8: unknown function foo; known functions: select, min, max, add, mul, exp, "
     "log, tanh, sqrt, rsqrt, erf, abs, relu, sigmoid, silu, gelu, and the casts f32, f16, bf16, "
     "f64, i32, i64, bool"},
    {"InputInExpression", "A = input(f32, [4])\nC[m] = A[m] + input(f32, [4])\noutput C\n",
     "line 2, column 15: input(...) declares a tensor on its own"},
    // Indexing.
    {"TooManyIndices", "A = input(f32, [4, 4])\nC[m, n] = A[m, n, 0]\noutput C\n",
     "line 2, column 11: A has rank 2 but is indexed with 3 indices"},
    {"TooFewIndices", "A = input(f32, [4, 4])\nC[m] = A[m]\noutput C\n",
     "line 2, column 8: A has rank 2 but is indexed with 1 indices"},
    {"RankTwoTensorWithoutIndices", "A = input(f32, [4, 4])\nC[m: 4] = A\noutput C\n",
     "line 2, column 11: A has rank 2 but is indexed with 0 indices; write A[...] with 2 indices"},
    {"FloatIndex", "A = input(f32, [4])\nC[m] = A[A[m]]\noutput C\n",
     "line 2, column 10: index 0 of A is the f32 A[m]; indices must be integers, e.g. an axis or "
     "i64(...)"},
    {"Int32Index", "A = input(f32, [4])\nI = input(i32, [4])\nC[m] = A[I[m]]\noutput C\n",
     "line 3, column 10: index 0 of A has type i32; indices are i64: write i64(I[m])"},
    // Extents.
    {"UninferableAxis", "b = input(f32, [4])\nD[m, n] = b[n] * 2.0\noutput D\n",
     "line 2, column 3: cannot infer the extent of axis m of D: it never indexes a tensor "
     "dimension alone; write `m: EXTENT` in the axis list of D"},
    {"UninferableReductionAxis", "b = input(f32, [4])\nD[n] = sum(r) b[n] * 2.0\noutput D\n",
     "line 2, column 12: cannot infer the extent of axis r of D: it never indexes a tensor "
     "dimension alone; write `r: EXTENT` in sum(...)"},
    {"ConflictingExtents",
     "A = input(f32, [4, 8])\nB = input(f32, [6, 4])\nC[m, n] = sum(k) A[m, k] * B[k, n]\n"
     "output C\n",
     "line 3, column 30: conflicting extents for axis k of C: 8 from dimension 1 of A (line 3, "
     "column 23) but 6 from dimension 0 of B; write `k: EXTENT` in sum(...) to choose one"},
    {"ExplicitExtentTooLarge", "A = input(f32, [4])\nC[m: 5] = A[m]\noutput C\n",
     "line 2, column 13: axis m of C has extent 5 but indexes dimension 0 of A, which has extent "
     "4; make the extent at most 4"},
    {"NonPositiveExtent", "A = input(f32, [4])\nC[m: 2 - 2] = A[m]\noutput C\n",
     "line 2, column 6: the extent of axis m is 0; extents must be positive"},
    {"NonConstantExtent", "A = input(f32, [4])\nC[m: n] = A[m]\noutput C\n",
     "line 2, column 6: size parameter n is not bound; add `with n = INTEGER`"},
    // Reductions.
    {"EmptyReduction", "A = input(f32, [4])\nC = sum() A[0]\noutput C\n",
     "line 2, column 9: sum() needs at least one reduction axis, as in sum(k)"},
    {"ReductionWithoutBody", "A = input(f32, [4])\nC = sum(k)\noutput C\n",
     "line 2, column 11: expected the body of the reduction sum(...) of C, found end of line"},
    {"BadReductionAxis", "A = input(f32, [4])\nC = sum(A[0]) A[0]\noutput C\n",
     "line 2, column 9: expected a reduction axis name in sum(...), found an expression; the "
     "reduced expression follows the axes, as in sum(k) A[m, k]"},
    {"BadReductionSeparator", "A = input(f32, [4, 4])\nC = sum(k j) A[k, j]\noutput C\n",
     "line 2, column 11: expected ',' or ')' in the reduction axes of C, found 'j'"},
    {"ReductionInsideExpression", "A = input(f32, [4])\nC = 2.0 * sum(k) A[k]\noutput C\n",
     "line 2, column 11: sum(AXES) is a reduction and can only start the body of a definition, "
     "as in C[m] = sum(k) A[m, k]; define the reduction as its own tensor and read it here"},
    {"MaxReductionInsideExpression", "A = input(f32, [4])\nC = 2.0 * max(k: 4) A[k]\noutput C\n",
     "line 2, column 11: max(AXES) is a reduction and can only start the body of a definition"},
    {"MaxWithOneArgument", "A = input(f32, [4])\nC[i] = max(A[i])\noutput C\n",
     "line 2, column 8: max takes 2 arguments but is given 1; a reduction is written max(AXES) "
     "BODY at the start of a definition's body"},
    {"ReductionOfBool", "A = input(f32, [4])\nC = sum(k) A[k] > 0.0\noutput C\n",
     "line 2, column 5: cannot reduce a bool body with sum; cast it, e.g. f32(...) or i64(...)"},
    // Types.
    {"FloatTypeMismatch",
     "A = input(f16, [4])\nB = input(f32, [4])\nC[m] = A[m] + B[m]\noutput C\n",
     "line 3, column 13: operands of '+' have different types: f16 (A[m]) and f32 (B[m]); cast "
     "one of them, e.g. f32(A[m])"},
    {"IntFloatMismatch", "A = input(f32, [4])\nC[m] = A[m] * m\noutput C\n",
     "line 2, column 13: operands of '*' have different types: f32 (A[m]) and i64 (m); cast the "
     "integer, e.g. f32(m)"},
    {"FloatLiteralWithInteger", "I = input(i64, [4])\nC[m] = I[m] * 0.5\noutput C\n",
     "line 2, column 13: operands of '*' have different types: i64 (I[m]) and f32 (0.5)"},
    {"SelectBranchesMismatch",
     "A = input(f16, [4])\nB = input(f32, [4])\nC[m] = select(m < 2, A[m], B[m])\noutput C\n",
     "line 3, column 8: the branches of select have different types: f16 (A[m]) and f32 (B[m])"},
    {"SelectConditionNotBool", "A = input(f32, [4])\nC[m] = select(A[m], 1.0, 0.0)\noutput C\n",
     "line 2, column 8: the condition of select must be bool (a comparison), found f32 (A[m])"},
    {"ArithmeticOnBool", "A = input(f32, [4])\nC[m] = (m < 2) + (m > 1)\noutput C\n",
     "line 2, column 16: '+' cannot be applied to bool operands (m < 2); use select(cond, a, b) "
     "or a cast such as f32(...)"},
    {"LogicOnNumbers", "A = input(f32, [4])\nC[m] = A[m] && m < 2\noutput C\n",
     "line 2, column 13: the operands of '&&' must be bool (comparisons), found f32 (A[m])"},
    {"NotOnNumber", "A = input(f32, [4])\nC[m] = !A[m]\noutput C\n",
     "line 2, column 8: '!' needs a bool operand (a comparison), found f32 A[m]"},
    {"NegateBool", "A = input(f32, [4])\nC[m] = -(m < 2)\noutput C\n",
     "line 2, column 8: cannot negate the bool m < 2; use '!' for logical not"},
    {"FloatModulo", "A = input(f32, [4])\nC[m] = A[m] % 2.0\noutput C\n",
     "line 2, column 13: '%' needs integer operands, found f32 (A[m])"},
    {"DivisionByZero", "A = input(f32, [4])\nC[m] = m / 0\noutput C\n",
     "line 2, column 10: integer division by zero in m / 0"},
    {"MathOnInteger", "A = input(f32, [4])\nC[m] = exp(m)\noutput C\n",
     "line 2, column 8: exp needs a floating-point argument, found the i64 m; cast it, e.g. "
     "exp(f32(m))"},
    {"ReluOnBool", "A = input(f32, [4])\nC[m] = relu(m < 2)\noutput C\n",
     "line 2, column 8: relu needs a number, found the bool m < 2"},
    {"WrongArity", "A = input(f32, [4])\nC[m] = gelu(A[m], A[m])\noutput C\n",
     "line 2, column 8: gelu takes 1 argument but is given 2"},
    {"BadArgumentSeparator", "A = input(f32, [4])\nC[m] = select(m < 2 A[m], 0.0)\noutput C\n",
     "line 2, column 21: expected ',' or ')' after argument 1 of select, found 'A'"},
    // Outputs.
    {"NoOutput", "A = input(f32, [4])\nC[m] = A[m]\n",
     "line 3, column 1: expected an `output NAME` statement naming the tensors the workload "
     "produces, found end of input"},
    {"UnknownOutput", "A = input(f32, [4])\nC[m] = A[m]\noutput Z\n",
     "line 3, column 8: output Z is not a tensor of this workload; its tensors are A, C"},
    {"InputAsOutput", "A = input(f32, [4])\nC[m] = A[m]\noutput A\n",
     "line 3, column 8: output A is an input; outputs must be computed tensors"},
    {"OutputTwice", "A = input(f32, [4])\nC[m] = A[m]\noutput C, C\n",
     "line 3, column 11: C is listed as an output twice (first at line 3)"},
    {"OutputWithoutName", "A = input(f32, [4])\nC[m] = A[m]\noutput\n",
     "line 3, column 7: expected a tensor name after 'output', found end of line"},
};

INSTANTIATE_TEST_SUITE_P(WorkloadParser, WorkloadParserErrorTest, ::testing::ValuesIn(kErrors),
                         [](const ::testing::TestParamInfo<ErrorCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace tessel::schedules

namespace tessel::schedules {
namespace {

// Issue 20, point 9: errors echoed a 100 KB input in full (and a server's reply with them).
// The offending token is named, cut to 80 bytes.
TEST(WorkloadParser, AHugeTokenIsQuotedShortInTheError) {
  const std::string name(100000, 'z');
  absl::StatusOr<Workload> w = ParseWorkload("A = input(f32, [M, K])\nB[m] = sum(k) A[m, k] + " +
                                             name + "\noutput B with M = 4, K = 4");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().message(),
            "line 2, column 25: unknown name " + std::string(77, 'z') +
                "... in the definition of B: not an axis of B (m), a tensor or a size parameter; "
                "bind size parameters with `with " +
                std::string(77, 'z') + "... = INTEGER`");
  absl::StatusOr<Workload> spec = ParseWorkloadText("softmax(rows=8, cols=64" + name + ")");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().message(),
            "parameter cols of softmax must be a positive integer, found '64" +
                std::string(74, 'z') + "...");
  absl::StatusOr<Target> t = MakeTarget(std::string(100000, 'k'), "");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(),
            "unknown target '" + std::string(76, 'k') + "... use --target cuda or --target host");
}

TEST(ShortWords, OnlyWordsLongerThan80BytesAreCut) {
  const std::string w80(80, 'a');
  EXPECT_EQ(ShortenLongWords("x " + w80 + "\n" + w80 + "b y"),
            "x " + w80 + "\n" + std::string(77, 'a') + "... y");
  const absl::Status s = absl::InvalidArgumentError("short words stay");
  EXPECT_EQ(WithShortWords(s), s);
}

}  // namespace
}  // namespace tessel::schedules
