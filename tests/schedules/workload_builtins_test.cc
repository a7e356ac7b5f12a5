#include "schedules/workload/builtins.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "schedules/ir/expr.h"
#include "schedules/workload/parser.h"
#include "tests/test_util.h"

namespace tessel::schedules {
namespace {

using ::testing::HasSubstr;
using Shape = std::vector<int64_t>;

Workload MustLoad(const std::string& spec) {
  absl::StatusOr<Workload> w = ParseWorkloadSpec(spec);
  EXPECT_TRUE(w.ok()) << spec << ": " << w.status().message();
  if (!w.ok()) return Workload{};
  EXPECT_TRUE(ValidateWorkload(*w).ok()) << spec;
  return *std::move(w);
}

std::vector<std::string> Names(const Workload& w) {
  std::vector<std::string> names;
  for (const TensorDef& t : w.tensors) names.push_back(t.name);
  return names;
}

Shape ShapeOf(const Workload& w, const std::string& tensor) {
  const TensorDef* t = w.Find(tensor);
  return t ? t->buffer->shape : Shape{-1};
}

DType DTypeOf(const Workload& w, const std::string& tensor) {
  const TensorDef* t = w.Find(tensor);
  return t ? t->buffer->dtype : DType::kBool;
}

std::string Body(const Workload& w, const std::string& tensor) {
  const TensorDef* t = w.Find(tensor);
  return t && t->body ? ToString(t->body) : "<none>";
}

TEST(WorkloadBuiltins, MatmulF32) {
  Workload w = MustLoad("matmul(M=1024, N=512, K=256)");
  EXPECT_EQ(w.name, "matmul");
  EXPECT_EQ(w.spec,
            "matmul(M=1024, N=512, K=256, batch=1, transpose_a=false, transpose_b=false, "
            "dtype=f32)");
  EXPECT_EQ(Names(w), (std::vector<std::string>{"A", "B", "C"}));
  EXPECT_EQ(ShapeOf(w, "A"), (Shape{1024, 256}));
  EXPECT_EQ(ShapeOf(w, "B"), (Shape{256, 512}));
  EXPECT_EQ(ShapeOf(w, "C"), (Shape{1024, 512}));
  EXPECT_EQ(DTypeOf(w, "C"), DType::kFloat32);
  EXPECT_EQ(w.outputs, std::vector<std::string>{"C"});
  const TensorDef* c = w.Find("C");
  EXPECT_EQ(*c->reduce, ReduceOp::kSum);
  EXPECT_EQ(c->reduce_extents, (Shape{256}));
  EXPECT_EQ(Body(w, "C"), "A[m, k] * B[k, n]");
  EXPECT_DOUBLE_EQ(w.Flops(), 2.0 * 1024 * 512 * 256);
}

TEST(WorkloadBuiltins, MatmulBatchedAndTransposed) {
  Workload w = MustLoad("matmul(M=64, N=32, K=16, batch=8, transpose_a=true, transpose_b=true)");
  EXPECT_EQ(ShapeOf(w, "A"), (Shape{8, 16, 64}));
  EXPECT_EQ(ShapeOf(w, "B"), (Shape{8, 32, 16}));
  EXPECT_EQ(ShapeOf(w, "C"), (Shape{8, 64, 32}));
  EXPECT_EQ(w.Find("C")->axes.size(), 3u);
  EXPECT_EQ(Body(w, "C"), "A[b, k, m] * B[b, n, k]");

  Workload ta = MustLoad("matmul(M=64, N=32, K=16, transpose_a=1)");
  EXPECT_EQ(ShapeOf(ta, "A"), (Shape{16, 64}));
  EXPECT_EQ(ShapeOf(ta, "B"), (Shape{16, 32}));
  EXPECT_EQ(Body(ta, "C"), "A[k, m] * B[k, n]");

  Workload tb = MustLoad("matmul(M=64, N=32, K=16, transpose_b=True)");
  EXPECT_EQ(ShapeOf(tb, "B"), (Shape{32, 16}));
  EXPECT_EQ(Body(tb, "C"), "A[m, k] * B[n, k]");
  EXPECT_EQ(tb.spec,
            "matmul(M=64, N=32, K=16, batch=1, transpose_a=false, transpose_b=true, dtype=f32)");
}

TEST(WorkloadBuiltins, MatmulHalfPrecisionAccumulatesInF32) {
  for (const char* dt : {"f16", "bf16"}) {
    SCOPED_TRACE(dt);
    const DType t = *ParseDType(dt);
    Workload w = MustLoad(std::string("matmul(M=128, N=64, K=32, dtype=") + dt + ")");
    EXPECT_EQ(Names(w), (std::vector<std::string>{"A", "B", "C", "D"}));
    EXPECT_EQ(DTypeOf(w, "A"), t);
    EXPECT_EQ(DTypeOf(w, "B"), t);
    EXPECT_EQ(DTypeOf(w, "C"), DType::kFloat32);
    EXPECT_EQ(DTypeOf(w, "D"), t);
    EXPECT_EQ(ShapeOf(w, "D"), (Shape{128, 64}));
    EXPECT_FALSE(w.Find("D")->reduce.has_value());
    EXPECT_EQ(Body(w, "C"), "f32(A[m, k]) * f32(B[k, n])");
    EXPECT_EQ(Body(w, "D"), std::string(dt) + "(C[m, n])");
    EXPECT_EQ(w.outputs, std::vector<std::string>{"D"});
  }
}

TEST(WorkloadBuiltins, MatmulBiasGelu) {
  Workload w = MustLoad("matmul_bias_gelu(M=256, N=128, K=64)");
  EXPECT_EQ(w.name, "matmul_bias_gelu");
  EXPECT_EQ(Names(w), (std::vector<std::string>{"A", "B", "bias", "C", "D"}));
  EXPECT_EQ(ShapeOf(w, "bias"), (Shape{128}));
  EXPECT_EQ(ShapeOf(w, "D"), (Shape{256, 128}));
  EXPECT_EQ(Body(w, "D"),
            "0.5 * (C[m, n] + bias[n]) * (1.0 + erf((C[m, n] + bias[n]) * 0.707106781))");
  EXPECT_EQ(w.outputs, std::vector<std::string>{"D"});

  Workload h = MustLoad("matmul_bias_gelu(M=256, N=128, K=64, dtype=f16)");
  EXPECT_EQ(Names(h), (std::vector<std::string>{"A", "B", "bias", "C", "D"}));
  EXPECT_EQ(DTypeOf(h, "bias"), DType::kFloat16);
  EXPECT_EQ(DTypeOf(h, "C"), DType::kFloat32);
  EXPECT_EQ(DTypeOf(h, "D"), DType::kFloat16);
}

TEST(WorkloadBuiltins, Conv2dNchw) {
  Workload w = MustLoad("conv2d(N=2, C=3, H=32, W=30, K=16, R=3, S=5)");
  EXPECT_EQ(w.name, "conv2d");
  EXPECT_EQ(w.spec,
            "conv2d(N=2, C=3, H=32, W=30, K=16, R=3, S=5, stride=1, padding=0, dilation=1, "
            "layout=nchw, dtype=f32)");
  EXPECT_EQ(Names(w), (std::vector<std::string>{"data", "weight", "conv"}));
  EXPECT_EQ(ShapeOf(w, "data"), (Shape{2, 3, 32, 30}));
  EXPECT_EQ(ShapeOf(w, "weight"), (Shape{16, 3, 3, 5}));
  EXPECT_EQ(ShapeOf(w, "conv"), (Shape{2, 16, 30, 26}));
  EXPECT_EQ(w.Find("conv")->reduce_extents, (Shape{3, 3, 5}));
  EXPECT_EQ(Body(w, "conv"), "data[n, c, p + r, q + s] * weight[k, c, r, s]");
}

TEST(WorkloadBuiltins, Conv2dPaddingStrideDilation) {
  // P = (H + 2*padding - dilation*(R-1) - 1)/stride + 1 = (32 + 2 - 4 - 1)/2 + 1 = 15.
  Workload w = MustLoad(
      "conv2d(N=1, C=4, H=32, W=16, K=8, R=3, S=3, stride=2, padding=1, "
      "dilation=2)");
  EXPECT_EQ(Names(w), (std::vector<std::string>{"data", "weight", "padded", "conv"}));
  EXPECT_EQ(ShapeOf(w, "padded"), (Shape{1, 4, 34, 18}));
  EXPECT_EQ(ShapeOf(w, "conv"), (Shape{1, 8, 15, 7}));
  EXPECT_EQ(Body(w, "padded"),
            "select(h >= 1 && h < 33 && w >= 1 && w < 17, data[n, c, h - 1, w - 1], 0.0)");
  EXPECT_EQ(Body(w, "conv"), "padded[n, c, p * 2 + r * 2, q * 2 + s * 2] * weight[k, c, r, s]");
  EXPECT_FALSE(w.Find("padded")->reduce.has_value());
}

TEST(WorkloadBuiltins, Conv2dNhwc) {
  Workload w = MustLoad("conv2d(N=2, C=3, H=8, W=8, K=16, R=3, S=3, padding=1, layout=nhwc)");
  EXPECT_EQ(ShapeOf(w, "data"), (Shape{2, 8, 8, 3}));
  EXPECT_EQ(ShapeOf(w, "weight"), (Shape{16, 3, 3, 3}));
  EXPECT_EQ(ShapeOf(w, "padded"), (Shape{2, 10, 10, 3}));
  EXPECT_EQ(ShapeOf(w, "conv"), (Shape{2, 8, 8, 16}));
  EXPECT_EQ(Body(w, "conv"), "padded[n, p + r, q + s, c] * weight[k, r, s, c]");
  // nhwc weights are K, R, S, C: distinguishable when C differs from R and S.
  Workload v = MustLoad("conv2d(N=1, C=5, H=8, W=8, K=4, R=3, S=2, layout=nhwc)");
  EXPECT_EQ(ShapeOf(v, "weight"), (Shape{4, 3, 2, 5}));
  EXPECT_EQ(v.Find("conv")->reduce_extents, (Shape{3, 2, 5}));
}

TEST(WorkloadBuiltins, Conv2dHalfPrecision) {
  Workload w = MustLoad("conv2d(N=1, C=3, H=8, W=8, K=4, R=3, S=3, dtype=f16)");
  EXPECT_EQ(Names(w), (std::vector<std::string>{"data", "weight", "conv", "out"}));
  EXPECT_EQ(DTypeOf(w, "conv"), DType::kFloat32);
  EXPECT_EQ(DTypeOf(w, "out"), DType::kFloat16);
  EXPECT_EQ(w.outputs, std::vector<std::string>{"out"});
}

TEST(WorkloadBuiltins, Conv2dBiasRelu) {
  Workload w = MustLoad("conv2d_bias_relu(N=1, C=3, H=8, W=8, K=4, R=3, S=3, padding=1)");
  EXPECT_EQ(w.name, "conv2d_bias_relu");
  EXPECT_EQ(Names(w),
            (std::vector<std::string>{"data", "weight", "bias", "padded", "conv", "out"}));
  EXPECT_EQ(ShapeOf(w, "bias"), (Shape{4}));
  EXPECT_EQ(ShapeOf(w, "out"), (Shape{1, 4, 8, 8}));
  EXPECT_EQ(Body(w, "out"), "max(conv[n, k, p, q] + bias[k], 0.0)");

  Workload h = MustLoad(
      "conv2d_bias_relu(N=1, C=3, H=8, W=8, K=4, R=3, S=3, layout=nhwc, "
      "dtype=bf16)");
  EXPECT_EQ(ShapeOf(h, "out"), (Shape{1, 6, 6, 4}));
  EXPECT_EQ(DTypeOf(h, "out"), DType::kBFloat16);
  EXPECT_EQ(Body(h, "out"), "bf16(max(conv[n, p, q, k] + f32(bias[k]), 0.0))");
}

TEST(WorkloadBuiltins, Softmax) {
  Workload w = MustLoad("softmax(rows=128, cols=1000)");
  EXPECT_EQ(w.name, "softmax");
  EXPECT_EQ(w.spec, "softmax(rows=128, cols=1000, dtype=f32)");
  EXPECT_EQ(Names(w), (std::vector<std::string>{"X", "row_max", "exps", "row_sum", "Y"}));
  EXPECT_EQ(*w.Find("row_max")->reduce, ReduceOp::kMax);
  EXPECT_EQ(*w.Find("row_sum")->reduce, ReduceOp::kSum);
  EXPECT_EQ(ShapeOf(w, "row_max"), (Shape{128}));
  EXPECT_EQ(ShapeOf(w, "Y"), (Shape{128, 1000}));
  EXPECT_EQ(Body(w, "exps"), "exp(X[i, j] - row_max[i])");
  EXPECT_EQ(Body(w, "Y"), "exps[i, j] / row_sum[i]");

  Workload h = MustLoad("softmax(rows=128, cols=1000, dtype=f16)");
  EXPECT_EQ(h.tensors.size(), 5u);
  EXPECT_EQ(DTypeOf(h, "row_max"), DType::kFloat32);
  EXPECT_EQ(DTypeOf(h, "row_sum"), DType::kFloat32);
  EXPECT_EQ(DTypeOf(h, "Y"), DType::kFloat16);
}

TEST(WorkloadBuiltins, Layernorm) {
  Workload w = MustLoad("layernorm(rows=64, cols=768)");
  EXPECT_EQ(Names(w), (std::vector<std::string>{"X", "weight", "bias", "x_sum", "mean", "sq_sum",
                                                "var", "Y"}));
  EXPECT_EQ(ShapeOf(w, "weight"), (Shape{768}));
  EXPECT_EQ(ShapeOf(w, "bias"), (Shape{768}));
  EXPECT_EQ(ShapeOf(w, "mean"), (Shape{64}));
  EXPECT_EQ(ShapeOf(w, "Y"), (Shape{64, 768}));
  EXPECT_EQ(Body(w, "mean"), "x_sum[i] / 768.0");
  EXPECT_EQ(Body(w, "Y"), "(X[i, j] - mean[i]) * rsqrt(var[i] + 1e-05) * weight[j] + bias[j]");
  Workload h = MustLoad("layernorm(rows=64, cols=768, dtype=bf16)");
  EXPECT_EQ(DTypeOf(h, "var"), DType::kFloat32);
  EXPECT_EQ(DTypeOf(h, "Y"), DType::kBFloat16);
}

TEST(WorkloadBuiltins, Reduce) {
  Workload sum = MustLoad("reduce(rows=32, cols=100)");
  EXPECT_EQ(sum.spec, "reduce(rows=32, cols=100, op=sum, dtype=f32)");
  EXPECT_EQ(Names(sum), (std::vector<std::string>{"X", "Y"}));
  EXPECT_EQ(*sum.Find("Y")->reduce, ReduceOp::kSum);
  EXPECT_EQ(ShapeOf(sum, "Y"), (Shape{32}));

  Workload max = MustLoad("reduce(rows=32, cols=100, op=max, dtype=f16)");
  EXPECT_EQ(Names(max), (std::vector<std::string>{"X", "Y"}));
  EXPECT_EQ(*max.Find("Y")->reduce, ReduceOp::kMax);
  EXPECT_EQ(DTypeOf(max, "Y"), DType::kFloat16);

  Workload mean = MustLoad("reduce(rows=32, cols=100, op=mean)");
  EXPECT_EQ(Names(mean), (std::vector<std::string>{"X", "acc", "Y"}));
  EXPECT_EQ(Body(mean, "Y"), "acc[i] / 100.0");

  Workload half = MustLoad("reduce(rows=32, cols=100, dtype=f16)");
  EXPECT_EQ(Names(half), (std::vector<std::string>{"X", "acc", "Y"}));
  EXPECT_EQ(DTypeOf(half, "acc"), DType::kFloat32);
  EXPECT_EQ(Body(half, "Y"), "f16(acc[i])");
}

TEST(WorkloadBuiltins, SpecSyntaxIsForgiving) {
  Workload w = MustLoad("  softmax ( cols = 10 ,rows=2 )  ");
  EXPECT_EQ(w.spec, "softmax(rows=2, cols=10, dtype=f32)");
  // A normalized spec parses to itself.
  EXPECT_EQ(MustLoad(w.spec).spec, w.spec);
}

TEST(WorkloadBuiltins, BuiltinWorkloadTextIsTheTextFormat) {
  absl::StatusOr<std::string> text = BuiltinWorkloadText("matmul(M=4, N=3, K=2)");
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_EQ(*text,
            "A = input(f32, [4, 2])\n"
            "B = input(f32, [2, 3])\n"
            "C[m, n] = sum(k) A[m, k] * B[k, n]\n"
            "output C\n");
  EXPECT_TRUE(ParseWorkload(*text).ok());
}

TEST(WorkloadBuiltins, FamiliesAreListed) {
  const std::vector<BuiltinFamily> families = BuiltinFamilies();
  std::vector<std::string> names;
  for (const BuiltinFamily& f : families) {
    names.push_back(f.name);
    EXPECT_FALSE(f.description.empty());
    EXPECT_FALSE(f.params.empty());
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"matmul", "matmul_bias_gelu", "conv2d", "conv2d_bias_relu",
                                      "softmax", "layernorm", "reduce"}));
  const BuiltinFamily& matmul = families[0];
  EXPECT_EQ(matmul.params[0].name, "M");
  EXPECT_EQ(matmul.params[0].default_value, "");
  EXPECT_EQ(matmul.params[3].name, "batch");
  EXPECT_EQ(matmul.params[3].default_value, "1");
}

// ---- LoadWorkload

std::string WriteFile(const std::string& name, const std::string& contents) {
  const std::string dir = testing::MakeTempDir("workload_builtins_test");
  EXPECT_FALSE(dir.empty());
  const std::string path = dir + "/" + name;
  std::ofstream(path) << contents;
  return path;
}

TEST(WorkloadBuiltins, LoadWorkloadAcceptsSpecsTextAndFiles) {
  absl::StatusOr<Workload> spec = LoadWorkload("softmax(rows=4, cols=8)");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->name, "softmax");

  const std::string text = "X = input(f32, [4, 8])\nY[i] = sum(j) X[i, j]\noutput Y\n";
  absl::StatusOr<Workload> inline_text = LoadWorkload(text);
  ASSERT_TRUE(inline_text.ok()) << inline_text.status().message();
  EXPECT_EQ(inline_text->name, "custom");
  EXPECT_EQ(inline_text->spec, text);

  absl::StatusOr<Workload> file = LoadWorkload(WriteFile("gemm.wl", text));
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->name, "custom");
  EXPECT_EQ(file->tensors.size(), 2u);

  absl::StatusOr<Workload> spec_file =
      LoadWorkload(WriteFile("spec.txt", "matmul(M=2, N=2, K=2)\n"));
  ASSERT_TRUE(spec_file.ok()) << spec_file.status().message();
  EXPECT_EQ(spec_file->name, "matmul");
}

TEST(WorkloadBuiltins, LoadWorkloadPrefixesFileErrorsWithThePath) {
  const std::string path = WriteFile("bad.wl", "X = input(f32, [4, 8])\nY[i] = X[i, j, k]\n");
  absl::StatusOr<Workload> w = LoadWorkload(path);
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(std::string(w.status().message()),
              HasSubstr(path + ": line 2, column 13: unknown name j"));
}

TEST(WorkloadBuiltins, LoadWorkloadReadsSeveralLinesAsADefinition) {
  absl::StatusOr<Workload> w = LoadWorkload("output Y\nY = 1.0\n");
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(w->name, "custom");
  absl::StatusOr<Workload> bad = LoadWorkload("hello\nworld\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("line 1, column 6: expected '[' (an axis list) or '=' after the tensor "
                        "name hello, found end of line"));
}

TEST(WorkloadBuiltins, LoadWorkloadOfAMissingFileSaysSo) {
  absl::StatusOr<Workload> w = LoadWorkload("no/such/gemm.wl");
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(std::string(w.status().message()),
              HasSubstr("('no/such/gemm.wl' is neither an existing file nor a definition in the "
                        "workload text format)"));
}

// ---- Errors: one case per user-facing message.

struct ErrorCase {
  const char* name;
  const char* spec;
  const char* message;  // a substring of the error
};

class WorkloadBuiltinsErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(WorkloadBuiltinsErrorTest, Reports) {
  const ErrorCase& c = GetParam();
  absl::StatusOr<Workload> w = ParseWorkloadSpec(c.spec);
  ASSERT_FALSE(w.ok()) << c.spec;
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(w.status().message()), HasSubstr(c.message)) << c.spec;
}

const ErrorCase kErrors[] = {
    {"UnknownFamily", "matmu(M=1, N=1, K=1)",
     "unknown workload family 'matmu'; known families: matmul, matmul_bias_gelu, conv2d, "
     "conv2d_bias_relu, softmax, layernorm, reduce"},
    {"UnknownParameter", "matmul(M=1, N=1, K=1, Q=2)",
     "unknown parameter 'Q' for matmul; its parameters are matmul(M, N, K, batch=1, "
     "transpose_a=false, transpose_b=false, dtype=f32)"},
    {"UnknownParameterWithWrongCase", "softmax(ROWS=1, cols=1)",
     "unknown parameter 'ROWS' for softmax; did you mean rows? its parameters are "
     "softmax(rows, cols, dtype=f32)"},
    {"MissingParameter", "matmul(M=1, N=1)",
     "missing parameter K of matmul (reduction length); write matmul(M, N, K, batch=1, "
     "transpose_a=false, transpose_b=false, dtype=f32)"},
    {"NoParameters", "conv2d", "missing parameter N of conv2d (batch size)"},
    {"DuplicateParameter", "matmul(M=1, N=1, K=1, M=2)",
     "parameter M of matmul is given twice; give it once"},
    {"MalformedValue", "matmul(M=abc, N=1, K=1)",
     "parameter M of matmul must be a positive integer, found 'abc'"},
    {"MalformedNumber", "matmul(M=12x, N=1, K=1)",
     "parameter M of matmul must be a positive integer, found '12x'"},
    {"ValueTooLarge", "matmul(M=99999999999999999999, N=1, K=1)",
     "parameter M of matmul must be a positive integer, found '99999999999999999999', which does "
     "not fit in 64 bits"},
    {"ZeroSize", "matmul(M=0, N=1, K=1)",
     "parameter M of matmul must be a positive integer, found 0"},
    {"NegativeSize", "softmax(rows=-4, cols=1)",
     "parameter rows of softmax must be a positive integer, found -4"},
    {"ZeroStride", "conv2d(N=1, C=1, H=4, W=4, K=1, R=1, S=1, stride=0)",
     "parameter stride of conv2d must be a positive integer, found 0"},
    {"NegativePadding", "conv2d(N=1, C=1, H=4, W=4, K=1, R=1, S=1, padding=-1)",
     "parameter padding of conv2d must be a non-negative integer, found -1"},
    {"MalformedBool", "matmul(M=1, N=1, K=1, transpose_a=yes)",
     "parameter transpose_a of matmul must be true or false, found 'yes'"},
    {"UnknownDType", "matmul(M=1, N=1, K=1, dtype=f64)",
     "unknown dtype 'f64' for matmul; expected one of f32, f16, bf16"},
    {"InvalidLayout", "conv2d(N=1, C=1, H=4, W=4, K=1, R=1, S=1, layout=nchwc)",
     "invalid layout 'nchwc' for conv2d; expected one of nchw, nhwc"},
    {"InvalidReduceOp", "reduce(rows=1, cols=1, op=prod)",
     "invalid op 'prod' for reduce; expected one of sum, max, mean"},
    // Syntax.
    {"EmptySpec", "   ", "empty workload spec; write FAMILY(NAME=VALUE, ...), e.g. matmul("},
    {"NoFamilyName", "(M=1)",
     "malformed workload spec '(M=1)': expected a family name such as matmul at column 1, found "
     "'('"},
    {"MissingOpenParen", "matmul M=1",
     "malformed workload spec 'matmul M=1': expected '(' after matmul at column 8, found 'M'"},
    {"MissingCloseParen", "matmul(M=1, N=2",
     "malformed workload spec 'matmul(M=1, N=2': expected ',' or ')' after the value of N at "
     "column 16, found the end of the spec"},
    {"MissingEquals", "matmul(M 1)",
     "malformed workload spec 'matmul(M 1)': expected '=' after the parameter M at column 10, "
     "found '1'"},
    {"MissingValue", "matmul(M=, N=1)",
     "malformed workload spec 'matmul(M=, N=1)': expected a value for the parameter M at column "
     "10, found ','"},
    {"MissingParameterName", "matmul(M=1, =2)",
     "malformed workload spec 'matmul(M=1, =2)': expected a parameter name at column 13, found "
     "'='"},
    {"TrailingText", "matmul(M=1, N=1, K=1) x",
     "malformed workload spec 'matmul(M=1, N=1, K=1) x': expected nothing after ')' at column 23, "
     "found 'x'"},
    // Shapes.
    {"ConvOutputHeightNotPositive", "conv2d(N=1, C=1, H=2, W=8, K=1, R=5, S=3)",
     "conv2d: the output height P = (H + 2*padding - dilation*(R-1) - 1)/stride + 1 is not "
     "positive for H=2, R=5, stride=1, padding=0, dilation=1: the dilated filter spans 5 rows but "
     "the "
     "padded input has 2; increase H or padding, or decrease R or dilation"},
    {"ConvDilatedFilterLargerThanPaddedInput",
     "conv2d_bias_relu(N=1, C=1, H=8, W=8, K=1, R=3, S=3, dilation=5, padding=1)",
     "conv2d_bias_relu: the output height P = (H + 2*padding - dilation*(R-1) - 1)/stride + 1 is "
     "not positive for H=8, R=3, stride=1, padding=1, dilation=5: the dilated filter spans 11 "
     "rows but the padded input has 10"},
    {"ConvOutputWidthNotPositive", "conv2d(N=1, C=1, H=8, W=2, K=1, R=1, S=3)",
     "conv2d: the output width Q = (W + 2*padding - dilation*(S-1) - 1)/stride + 1 is not "
     "positive for W=2, S=3, stride=1, padding=0, dilation=1: the dilated filter spans 3 columns "
     "but the padded input has 2; increase W or padding, or decrease S or dilation"},
    {"ConvSizesOverflow", "conv2d(N=1, C=1, H=8, W=8, K=1, R=3, S=3, dilation=9223372036854775807)",
     "conv2d: computing the output height overflows 64-bit integers (H=8, R=3, padding=0, "
     "dilation=9223372036854775807); use realistic sizes"},
    {"TensorTooLarge", "matmul(M=2000000, N=16, K=1000000)",
     "matmul: tensor A of shape [2000000, 1000000] has 2000000000000 elements, more than the "
     "limit of 2^40 (1099511627776) elements per tensor"},
    {"BatchedTensorTooLarge", "matmul(M=1, N=2097152, K=1, batch=1048576)",
     "matmul: tensor B of shape [1048576, 1, 2097152] has 2199023255552 elements"},
    {"ElementCountOverflows", "matmul(M=4294967296, N=1, K=4294967296)",
     "matmul: tensor A of shape [4294967296, 4294967296] has more elements than a 64-bit integer "
     "can count"},
    {"PaddedInputTooLarge", "conv2d(N=1, C=1, H=1048576, W=1048575, K=1, R=1, S=1, padding=1)",
     "conv2d: tensor padded of shape [1, 1, 1048578, 1048577] has"},
};

INSTANTIATE_TEST_SUITE_P(WorkloadBuiltins, WorkloadBuiltinsErrorTest, ::testing::ValuesIn(kErrors),
                         [](const ::testing::TestParamInfo<ErrorCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace tessel::schedules
