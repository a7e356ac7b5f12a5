#include "schedules/workload/key.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "schedules/util/fnv1a.h"
#include "schedules/workload/builtins.h"
#include "schedules/workload/parser.h"

namespace tessel::schedules {
namespace {

Workload MustParse(const std::string& text) {
  absl::StatusOr<Workload> w = ParseWorkload(text);
  EXPECT_TRUE(w.ok()) << w.status().message() << "\n" << text;
  return w.ok() ? *std::move(w) : Workload{};
}

Workload MustSpec(const std::string& spec) {
  absl::StatusOr<Workload> w = ParseWorkloadSpec(spec);
  EXPECT_TRUE(w.ok()) << spec << ": " << w.status().message();
  return w.ok() ? *std::move(w) : Workload{};
}

const char kGemm[] = R"(# GEMM + bias + GELU
A = input(f32, [M, K])
B = input(f32, [K, N])
bias = input(f32, [N])
C[m, n] = sum(k) A[m, k] * B[k, n]
D[m, n] = gelu(C[m, n] + bias[n])
output D
with M = 1024, N = 1024, K = 512
)";

TEST(WorkloadKey, Fnv1a64MatchesReferenceVectors) {
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ULL);
}

TEST(WorkloadKey, CanonicalTextOfGemmBiasGelu) {
  EXPECT_EQ(CanonicalText(MustParse(kGemm)),
            "t0 = input(f32, [1024, 512])\n"
            "t1 = input(f32, [512, 1024])\n"
            "t2 = input(f32, [1024])\n"
            "t3[a0: 1024, a1: 1024] = sum(r0: 512) t0[a0, r0] * t1[r0, a1]\n"
            "t4[a0: 1024, a1: 1024] = 0.5 * (t3[a0, a1] + t2[a1]) * (1.0 + erf((t3[a0, a1] + "
            "t2[a1]) * 0.7071067811865476))\n"
            "output t4\n");
}

TEST(WorkloadKey, KeyIsTheFnvHashOfTheCanonicalTextInHex) {
  Workload w = MustParse(kGemm);
  const std::string key = WorkloadKey(w);
  ASSERT_EQ(key.size(), 16u);
  for (char c : key) EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << key;
  EXPECT_EQ(std::stoull(key, nullptr, 16), Fnv1a64(CanonicalText(w)));
}

TEST(WorkloadKey, IndependentOfWhitespaceCommentsNamesAndSpelling) {
  const std::string base = WorkloadKey(MustParse(kGemm));
  const std::vector<std::string> same = {
      // Whitespace, comments, separators, the with clause first.
      "with K=512,N=1024,M=1024 ; A=input(f32,[M,K]);B=input(f32,[K,N])\n"
      "   bias = input( f32 , [ N ] )   # per column\n\n"
      "C[m,n]=sum(k)A[m,k]*B[k,n]\nD[m,n]=gelu(C[m,n]+bias[n]);output D",
      // Every name changed.
      "lhs = input(f32, [1024, 512])\nrhs = input(f32, [512, 1024])\nb = input(f32, [1024])\n"
      "acc[i, j] = sum(r) lhs[i, r] * rhs[r, j]\nout[x, y] = gelu(acc[x, y] + b[y])\noutput out\n",
      // Explicit extents instead of inferred ones; parenthesized spelling of the same tree.
      "A = input(f32, [1024, 512])\nB = input(f32, [512, 1024])\nbias = input(f32, [1024])\n"
      "C[m: 1024, n: 1024] = sum(k: 512) (A[m, k] * B[k, n])\n"
      "D[m: 1024, n] = gelu((C[m, n]) + bias[n])\noutput D\n",
      // The expansion of gelu written out.
      "A = input(f32, [1024, 512])\nB = input(f32, [512, 1024])\nbias = input(f32, [1024])\n"
      "C[m, n] = sum(k) A[m, k] * B[k, n]\n"
      "D[m, n] = 0.5 * (C[m, n] + bias[n]) * (1 + erf((C[m, n] + bias[n]) * "
      "0.70710678118654752))\noutput D\n",
  };
  for (const std::string& text : same) EXPECT_EQ(WorkloadKey(MustParse(text)), base) << text;

  // The family name and the spec do not matter either.
  Workload renamed = MustParse(kGemm);
  renamed.name = "something_else";
  renamed.spec = "whatever";
  EXPECT_EQ(WorkloadKey(renamed), base);
}

TEST(WorkloadKey, BuiltinEqualsTheSameDefinitionWrittenByHand) {
  EXPECT_EQ(WorkloadKey(MustSpec("matmul_bias_gelu(M=1024, N=1024, K=512)")),
            WorkloadKey(MustParse(kGemm)));
  EXPECT_EQ(WorkloadKey(MustSpec("matmul(M=64, N=32, K=16, dtype=f16)")),
            WorkloadKey(MustParse("P = input(f16, [64, 16]); Q = input(f16, [16, 32])\n"
                                  "acc[i, j] = sum(r) f32(P[i, r]) * f32(Q[r, j])\n"
                                  "res[i, j] = f16(acc[i, j])\noutput res\n")));
}

TEST(WorkloadKey, StableAcrossParses) {
  // Fresh buffers and variables (new pointers) give the same key.
  EXPECT_EQ(WorkloadKey(MustParse(kGemm)), WorkloadKey(MustParse(kGemm)));
  EXPECT_EQ(WorkloadKey(MustSpec("softmax(rows=8, cols=8)")),
            WorkloadKey(MustSpec("softmax(rows=8, cols=8)")));
}

TEST(WorkloadKey, DiffersWhenTheComputationDiffers) {
  const std::vector<std::string> texts = {
      "A = input(f32, [4, 8])\nB = input(f32, [8, 4])\nC[m, n] = sum(k) A[m, k] * B[k, n]\n"
      "output C\n",
      // Shape.
      "A = input(f32, [4, 6])\nB = input(f32, [6, 4])\nC[m, n] = sum(k) A[m, k] * B[k, n]\n"
      "output C\n",
      // Dtype.
      "A = input(f16, [4, 8])\nB = input(f16, [8, 4])\nC[m, n] = sum(k) A[m, k] * B[k, n]\n"
      "output C\n",
      // Layout (transposed B).
      "A = input(f32, [4, 8])\nB = input(f32, [4, 8])\nC[m, n] = sum(k) A[m, k] * B[n, k]\n"
      "output C\n",
      // Body operator.
      "A = input(f32, [4, 8])\nB = input(f32, [8, 4])\nC[m, n] = sum(k) A[m, k] + B[k, n]\n"
      "output C\n",
      // Reduction kind.
      "A = input(f32, [4, 8])\nB = input(f32, [8, 4])\nC[m, n] = max(k) A[m, k] * B[k, n]\n"
      "output C\n",
      // Reduction extent (a slice).
      "A = input(f32, [4, 8])\nB = input(f32, [8, 4])\nC[m, n] = sum(k: 7) A[m, k] * B[k, n]\n"
      "output C\n",
      // Output extent (a slice).
      "A = input(f32, [4, 8])\nB = input(f32, [8, 4])\nC[m: 3, n] = sum(k) A[m, k] * B[k, n]\n"
      "output C\n",
      // Association.
      "A = input(f32, [4, 8])\nB = input(f32, [8, 4])\n"
      "C[m, n] = sum(k) A[m, k] - (B[k, n] - 1.0)\noutput C\n",
      "A = input(f32, [4, 8])\nB = input(f32, [8, 4])\n"
      "C[m, n] = sum(k) A[m, k] - B[k, n] - 1.0\noutput C\n",
      // A literal.
      "A = input(f32, [4, 8])\nB = input(f32, [8, 4])\n"
      "C[m, n] = sum(k) A[m, k] - B[k, n] - 2.0\noutput C\n",
      // Input order.
      "B = input(f32, [8, 4])\nA = input(f32, [4, 8])\nC[m, n] = sum(k) A[m, k] * B[k, n]\n"
      "output C\n",
      // An extra stage and the choice of outputs.
      "A = input(f32, [4, 8])\nB = input(f32, [8, 4])\nC[m, n] = sum(k) A[m, k] * B[k, n]\n"
      "D[m, n] = relu(C[m, n])\noutput D\n",
      "A = input(f32, [4, 8])\nB = input(f32, [8, 4])\nC[m, n] = sum(k) A[m, k] * B[k, n]\n"
      "D[m, n] = relu(C[m, n])\noutput C, D\n",
  };
  std::set<std::string> keys;
  for (const std::string& text : texts) keys.insert(WorkloadKey(MustParse(text)));
  EXPECT_EQ(keys.size(), texts.size());

  std::set<std::string> builtin_keys;
  const std::vector<std::string> specs = {
      "matmul(M=64, N=64, K=64)",
      "matmul(M=64, N=64, K=32)",
      "matmul(M=64, N=64, K=64, dtype=f16)",
      "matmul(M=64, N=64, K=64, dtype=bf16)",
      "matmul(M=64, N=64, K=64, transpose_a=true)",
      "matmul(M=64, N=64, K=64, batch=2)",
      "reduce(rows=64, cols=64)",
      "reduce(rows=64, cols=64, op=max)",
      "reduce(rows=64, cols=64, op=mean)",
      "conv2d(N=1, C=4, H=8, W=8, K=4, R=3, S=3)",
      "conv2d(N=1, C=4, H=8, W=8, K=4, R=3, S=3, layout=nhwc)",
      "conv2d(N=1, C=4, H=8, W=8, K=4, R=3, S=3, padding=1)",
  };
  for (const std::string& spec : specs) builtin_keys.insert(WorkloadKey(MustSpec(spec)));
  EXPECT_EQ(builtin_keys.size(), specs.size());
}

TEST(WorkloadKey, CanonicalTextParsesBackToItself) {
  std::vector<Workload> workloads;
  for (const char* spec :
       {"matmul(M=64, N=32, K=16, batch=3, transpose_a=true, transpose_b=true, dtype=f16)",
        "matmul_bias_gelu(M=64, N=32, K=16, dtype=bf16)",
        "conv2d(N=2, C=3, H=9, W=7, K=4, R=3, S=2, stride=2, padding=2, dilation=2, layout=nhwc)",
        "conv2d_bias_relu(N=1, C=3, H=8, W=8, K=4, R=3, S=3, padding=1, dtype=f16)",
        "softmax(rows=4, cols=8, dtype=f16)", "layernorm(rows=4, cols=8, dtype=bf16)",
        "reduce(rows=4, cols=8, op=mean, dtype=f16)"}) {
    workloads.push_back(MustSpec(spec));
  }
  workloads.push_back(
      MustParse("X = input(f16, [8]); J = input(i32, [8]); s = input(f32, [])\n"
                "a[i] = X[i] * 0.5 - -1.25 + i32(7) * f16(J[i])\n"
                "b[i] = select(!(i < 2) || J[i] == i32(3), -X[i], f16(-0.5))\n"
                "c = sum(i: 8) f32(X[i]) * s\n"
                "d[i] = min(J[i], i32(-2)) % i32(5) - max(J[i] / i32(3), J[i])\n"
                "e[i: 3] = (i < 1) == (i > 1) && 1.0e-30 < 2.5e20\n"
                "f[i] = -(X[i] - X[i]) / (X[i] + 1)\n"
                "output a, b, c, d, e, f\n"));
  for (const Workload& w : workloads) {
    const std::string canonical = CanonicalText(w);
    absl::StatusOr<Workload> again = ParseWorkload(canonical);
    ASSERT_TRUE(again.ok()) << again.status().message() << "\n" << canonical;
    EXPECT_EQ(CanonicalText(*again), canonical);
  }
}

// Keys are stored in tuning logs: a change that alters any of these invalidates every log.
// Only update them together with a migration of the stored keys.
TEST(WorkloadKey, PinnedKeysOfBuiltins) {
  const std::vector<std::pair<std::string, std::string>> pinned = {
      {"matmul(M=1024, N=1024, K=1024)", "e4cccc06c8df72dc"},
      {"matmul(M=4096, N=4096, K=4096, dtype=f16)", "70312ed4964b7a77"},
      {"matmul(M=512, N=256, K=128, batch=8, transpose_b=true)", "81f020db6f634a51"},
      {"matmul_bias_gelu(M=1024, N=1024, K=512)", "bd812c70ceb3f016"},
      {"conv2d(N=1, C=64, H=56, W=56, K=64, R=3, S=3, padding=1)", "9e8d12e4455de3cb"},
      {"conv2d_bias_relu(N=8, C=32, H=28, W=28, K=64, R=3, S=3, stride=2, padding=1, "
       "layout=nhwc, dtype=f16)",
       "82f46867f16ddaf6"},
      {"softmax(rows=4096, cols=1024)", "b1ad7687efff6920"},
      {"layernorm(rows=4096, cols=768, dtype=f16)", "5d584a7d50ab025e"},
      {"reduce(rows=1024, cols=1024, op=mean)", "0ab208f08f668e2c"},
  };
  for (const auto& [spec, key] : pinned) EXPECT_EQ(WorkloadKey(MustSpec(spec)), key) << spec;
}

}  // namespace
}  // namespace tessel::schedules
