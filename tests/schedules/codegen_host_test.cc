#include "schedules/codegen/host_codegen.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "schedules/ir/expr.h"
#include "schedules/ir/stmt.h"
#include "schedules/lower/program.h"
#include "tests/test_util.h"

namespace tessel::schedules {
namespace {

// ---- Building programs by hand.

Stmt Loop(const VarPtr& v, int64_t extent, Stmt body, ForKind kind = ForKind::kSerial) {
  return MakeFor(v, MakeInt(0), MakeInt(extent), kind, ThreadTag::kNone, std::move(body));
}

Program HostProgram(std::string name, std::vector<ProgramBuffer> buffers, Stmt body) {
  Program p;
  p.name = std::move(name);
  p.target = TargetKind::kHost;
  p.buffers = std::move(buffers);
  Kernel k;
  k.name = p.name + "_kernel0";
  k.body = std::move(body);
  for (const ProgramBuffer& b : p.buffers) k.params.push_back(b.buffer);
  p.kernels.push_back(std::move(k));
  return p;
}

// ---- Compiling and running generated code.

using Entry = void (*)(void* const*);

class HostModule {
 public:
  ~HostModule() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  // Compiles `src` with the system compiler into a shared object and loads its entry. Adds a
  // test failure (with the compiler's log and the code) and returns null when that fails.
  static std::unique_ptr<HostModule> Load(const GeneratedSource& src) {
    const std::string dir = testing::MakeTempDir("tessel_codegen_host_");
    EXPECT_FALSE(dir.empty());
    const std::string cc = dir + "/kernel.cc", so = dir + "/kernel.so", log = dir + "/log";
    std::ofstream(cc) << src.code;
    const std::string cmd = "g++ -O2 -Wall -Werror -fopenmp -shared -fPIC -std=c++17 -o " + so +
                            " " + cc + " > " + log + " 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      std::stringstream text;
      text << std::ifstream(log).rdbuf();
      ADD_FAILURE() << "generated code does not compile:\n" << text.str() << "\n" << src.code;
      return nullptr;
    }
    auto m = std::make_unique<HostModule>();
    // RTLD_NODELETE: the module may be the one that loaded libgomp, whose worker threads outlive
    // the parallel regions; unloading it under them crashes the process.
    m->handle_ = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (m->handle_ == nullptr) {
      ADD_FAILURE() << "dlopen: " << dlerror();
      return nullptr;
    }
    EXPECT_EQ(src.kernels.size(), 1u);
    m->entry_ = reinterpret_cast<Entry>(dlsym(m->handle_, src.kernels[0].entry.c_str()));
    if (m->entry_ == nullptr) {
      ADD_FAILURE() << "no symbol " << src.kernels[0].entry << " in\n" << src.code;
      return nullptr;
    }
    return m;
  }
  void Run(std::vector<void*> buffers) const { entry_(buffers.data()); }

 private:
  void* handle_ = nullptr;
  Entry entry_ = nullptr;
};

std::unique_ptr<HostModule> GenerateAndLoad(const Program& p) {
  absl::StatusOr<GeneratedSource> src = GenerateHost(p);
  EXPECT_TRUE(src.ok()) << src.status();
  if (!src.ok()) return nullptr;
  // For reading the generated code: TESSEL_CODEGEN_DUMP_DIR=/some/dir.
  if (const char* dump = std::getenv("TESSEL_CODEGEN_DUMP_DIR")) {
    std::ofstream(std::string(dump) + "/" + p.name + ".cc") << src->code;
  }
  EXPECT_EQ(src->buffers.size(), p.buffers.size());
  EXPECT_EQ(src->kernels.size(), 1u);
  EXPECT_EQ(src->kernels[0].entry, p.name);
  EXPECT_EQ(src->kernels[0].params.size(), p.buffers.size());
  return HostModule::Load(*src);
}

std::vector<float> RandomFloats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Reference rounding to bf16 (round to nearest even), written independently of the prelude:
// keep 8 significant bits with the FPU's default round-half-even.
float RoundToBf16(float x) {
  if (x == 0.0f || !std::isfinite(x)) return x;
  int e = 0;
  std::frexp(x, &e);      // x = m * 2^e, 0.5 <= |m| < 1
  e = std::max(e, -125);  // subnormals keep the quantum of the smallest normals, 2^-133
  return static_cast<float>(std::ldexp(std::nearbyint(std::ldexp(x, 8 - e)), e - 8));
}
uint16_t Bf16Bits(float rounded) {
  uint32_t u;
  std::memcpy(&u, &rounded, 4);
  return static_cast<uint16_t>(u >> 16);
}
float Bf16Value(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t F16Bits(_Float16 h) {
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
float F16Value(uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, 2);
  return static_cast<float>(h);
}

// ---- Tests.

TEST(CodegenHost, VectorAddWithMathIntrinsics) {
  constexpr int64_t n = 1000;
  BufferPtr a = MakeBuffer("A", DType::kFloat32, {n});
  BufferPtr b = MakeBuffer("B", DType::kFloat32, {n});
  BufferPtr c = MakeBuffer("C", DType::kFloat32, {n});
  BufferPtr d = MakeBuffer("D", DType::kFloat32, {n});
  VarPtr i = MakeVar("i");
  Expr ai = MakeLoad(a, {i}), bi = MakeLoad(b, {i});
  Expr pos = MakeCall("abs", {ai}, DType::kFloat32) + MakeFloat(0.5);
  Stmt body = Loop(i, n,
                   MakeSeq({MakeStore(c, {i}, ai + bi),
                            MakeStore(d, {i},
                                      MakeCall("exp", {ai}, DType::kFloat32) +
                                          MakeCall("tanh", {bi}, DType::kFloat32) +
                                          MakeCall("rsqrt", {pos}, DType::kFloat32) +
                                          MakeCall("erf", {ai}, DType::kFloat32) +
                                          MakeCall("log", {pos}, DType::kFloat32) +
                                          MakeCall("sqrt", {pos}, DType::kFloat32) +
                                          MakeMax(ai, bi) - MakeMin(ai, MakeFloat(-0.25)))}));
  Program p = HostProgram("vadd",
                          {{a, BufferRole::kInput},
                           {b, BufferRole::kInput},
                           {c, BufferRole::kOutput},
                           {d, BufferRole::kOutput}},
                          body);
  absl::StatusOr<GeneratedSource> src = GenerateHost(p);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_NE(src->code.find("extern \"C\" void vadd(void* const* buffers)"), std::string::npos)
      << src->code;
  EXPECT_NE(src->code.find("const float* __restrict__ A = static_cast<const float*>(buffers[0]);"),
            std::string::npos)
      << src->code;
  EXPECT_NE(src->code.find("float* __restrict__ C = static_cast<float*>(buffers[2]);"),
            std::string::npos);
  auto m = GenerateAndLoad(p);
  ASSERT_NE(m, nullptr);
  std::vector<float> av = RandomFloats(n, 1), bv = RandomFloats(n, 2), cv(n, NAN), dv(n, NAN);
  m->Run({av.data(), bv.data(), cv.data(), dv.data()});
  for (int64_t k = 0; k < n; ++k) {
    ASSERT_EQ(cv[k], av[k] + bv[k]) << k;
    const float x = av[k], y = bv[k], q = std::fabs(x) + 0.5f;
    const float want = std::exp(x) + std::tanh(y) + 1.0f / std::sqrt(q) + std::erf(x) +
                       std::log(q) + std::sqrt(q) + std::fmax(x, y) - std::fmin(x, -0.25f);
    ASSERT_NEAR(dv[k], want, 1e-5f * std::fabs(want) + 1e-6f) << k;
  }
}

TEST(CodegenHost, MatmulWithReductionIntoLocalAccumulator) {
  constexpr int64_t m = 33, n = 17, kk = 29;
  BufferPtr a = MakeBuffer("A", DType::kFloat32, {m, kk});
  BufferPtr b = MakeBuffer("B", DType::kFloat32, {kk, n});
  BufferPtr c = MakeBuffer("C", DType::kFloat32, {m, n});
  BufferPtr acc = MakeBuffer("acc", DType::kFloat32, {1}, MemScope::kLocal);
  VarPtr i = MakeVar("i"), j = MakeVar("j"), k = MakeVar("k");
  Stmt reduce =
      Loop(k, kk,
           MakeStore(acc, {MakeInt(0)},
                     MakeLoad(acc, {MakeInt(0)}) + MakeLoad(a, {i, k}) * MakeLoad(b, {k, j})));
  Stmt body =
      Loop(i, m,
           Loop(j, n,
                MakeAllocate(acc, MakeSeq({MakeStore(acc, {MakeInt(0)}, MakeFloat(0.0)), reduce,
                                           MakeStore(c, {i, j}, MakeLoad(acc, {MakeInt(0)}))}))),
           ForKind::kParallel);
  Program p = HostProgram(
      "matmul", {{a, BufferRole::kInput}, {b, BufferRole::kInput}, {c, BufferRole::kOutput}}, body);
  auto mod = GenerateAndLoad(p);
  ASSERT_NE(mod, nullptr);
  std::vector<float> av = RandomFloats(m * kk, 3), bv = RandomFloats(kk * n, 4), cv(m * n, NAN);
  mod->Run({av.data(), bv.data(), cv.data()});
  for (int64_t x = 0; x < m; ++x) {
    for (int64_t y = 0; y < n; ++y) {
      double want = 0;
      for (int64_t z = 0; z < kk; ++z) want += double(av[x * kk + z]) * bv[z * n + y];
      ASSERT_NEAR(cv[x * n + y], want, 1e-4) << x << "," << y;
    }
  }
}

TEST(CodegenHost, VectorizedReductionStaysALoopAndMatches) {
  // A reduction loop marked vectorized accumulates into one element; `omp simd` would break
  // its dependence, so the host prints a plain loop.
  constexpr int64_t rows = 7, cols = 64;
  BufferPtr a = MakeBuffer("A", DType::kFloat32, {rows, cols});
  BufferPtr c = MakeBuffer("C", DType::kFloat32, {rows});
  BufferPtr acc = MakeBuffer("acc", DType::kFloat32, {1}, MemScope::kLocal);
  VarPtr i = MakeVar("i"), k = MakeVar("k");
  Stmt reduce =
      Loop(k, cols, MakeStore(acc, {MakeInt(0)}, MakeLoad(acc, {MakeInt(0)}) + MakeLoad(a, {i, k})),
           ForKind::kVectorized);
  Stmt body = Loop(i, rows,
                   MakeAllocate(acc, MakeSeq({MakeStore(acc, {MakeInt(0)}, MakeFloat(0.0)), reduce,
                                              MakeStore(c, {i}, MakeLoad(acc, {MakeInt(0)}))})));
  Program p = HostProgram("rowsum", {{a, BufferRole::kInput}, {c, BufferRole::kOutput}}, body);
  auto src = GenerateHost(p);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_NE(src->code.find("// vectorized reduction: lane by lane on the host"), std::string::npos)
      << src->code;
  EXPECT_EQ(src->code.find("omp simd"), std::string::npos) << src->code;
  auto mod = GenerateAndLoad(p);
  ASSERT_NE(mod, nullptr);
  std::vector<float> av = RandomFloats(rows * cols, 5), cv(rows, NAN);
  mod->Run({av.data(), cv.data()});
  for (int64_t x = 0; x < rows; ++x) {
    double want = 0;
    for (int64_t z = 0; z < cols; ++z) want += av[x * cols + z];
    ASSERT_NEAR(cv[x], want, 1e-4) << x;
  }
}

TEST(CodegenHost, ParallelAndVectorizedLoops) {
  constexpr int64_t rows = 37, cols = 64;
  BufferPtr a = MakeBuffer("A", DType::kFloat32, {rows, cols});
  BufferPtr bias = MakeBuffer("bias", DType::kFloat32, {cols});
  BufferPtr c = MakeBuffer("C", DType::kFloat32, {rows, cols});
  VarPtr i = MakeVar("i"), jo = MakeVar("jo"), ji = MakeVar("ji"), inner = MakeVar("i_inner");
  Expr j = Expr(jo) * 8 + Expr(ji);
  Expr value = MakeMax(MakeLoad(a, {i, j}) * MakeFloat(2.0) + MakeLoad(bias, {j}), MakeFloat(0.0));
  // A nested parallel loop (of extent 1) must stay serial inside the outer parallel loop.
  Stmt body =
      Loop(i, rows,
           Loop(inner, 1,
                Loop(jo, cols / 8, Loop(ji, 8, MakeStore(c, {i, j}, value), ForKind::kVectorized)),
                ForKind::kParallel),
           ForKind::kParallel);
  Program p = HostProgram(
      "bias_relu", {{a, BufferRole::kInput}, {bias, BufferRole::kInput}, {c, BufferRole::kOutput}},
      body);
  absl::StatusOr<GeneratedSource> src = GenerateHost(p);
  ASSERT_TRUE(src.ok()) << src.status();
  const std::string& code = src->code;
  EXPECT_NE(code.find("#pragma omp simd"), std::string::npos) << code;
  const size_t first = code.find("#pragma omp parallel for");
  ASSERT_NE(first, std::string::npos) << code;
  EXPECT_EQ(code.find("#pragma omp parallel for", first + 1), std::string::npos) << code;
  auto m = GenerateAndLoad(p);
  ASSERT_NE(m, nullptr);
  std::vector<float> av = RandomFloats(rows * cols, 5), bv = RandomFloats(cols, 6),
                     cv(rows * cols, NAN);
  m->Run({av.data(), bv.data(), cv.data()});
  for (int64_t x = 0; x < rows; ++x) {
    for (int64_t y = 0; y < cols; ++y) {
      ASSERT_EQ(cv[x * cols + y], std::fmax(av[x * cols + y] * 2.0f + bv[y], 0.0f))
          << x << "," << y;
    }
  }
}

TEST(CodegenHost, LocalBuffersOnStackAndHeap) {
  // Reverses each row through a small local tile, and sums a large local buffer (128 KiB, on
  // the heap) with a padded row stride.
  constexpr int64_t rows = 8, cols = 16, big = 32768;
  BufferPtr a = MakeBuffer("A", DType::kFloat32, {rows, cols});
  BufferPtr c = MakeBuffer("C", DType::kFloat32, {rows, cols});
  BufferPtr s = MakeBuffer("S", DType::kFloat32, {1});
  BufferPtr tile = MakeBuffer("tile", DType::kFloat32, {cols}, MemScope::kLocal);
  BufferPtr large =
      MakeBuffer("large", DType::kFloat32, {big / 64, 64}, MemScope::kShared, {65, 1});
  VarPtr i = MakeVar("i"), j = MakeVar("j"), r = MakeVar("r"), q = MakeVar("q");
  Stmt reverse = Loop(
      i, rows,
      MakeAllocate(
          tile,
          MakeSeq({Loop(j, cols, MakeStore(tile, {j}, MakeLoad(a, {i, j}))),
                   Loop(j, cols,
                        MakeStore(c, {i, j}, MakeLoad(tile, {MakeInt(cols - 1) - Expr(j)})))})));
  Stmt sum = MakeAllocate(
      large,
      MakeSeq(
          {Loop(r, big / 64,
                Loop(q, 64,
                     MakeStore(large, {r, q}, MakeCast(DType::kFloat32, Expr(r) * 64 + Expr(q))))),
           MakeStore(s, {MakeInt(0)}, MakeFloat(0.0)),
           Loop(r, big / 64,
                Loop(q, 64,
                     MakeStore(s, {MakeInt(0)},
                               MakeLoad(s, {MakeInt(0)}) + MakeLoad(large, {r, q}))))}));
  Program p = HostProgram(
      "locals", {{a, BufferRole::kInput}, {c, BufferRole::kOutput}, {s, BufferRole::kOutput}},
      MakeSeq({reverse, sum}));
  absl::StatusOr<GeneratedSource> src = GenerateHost(p);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_NE(src->code.find("alignas(64) float tile[16];"), std::string::npos) << src->code;
  EXPECT_NE(src->code.find("std::vector<float>"), std::string::npos) << src->code;
  auto m = GenerateAndLoad(p);
  ASSERT_NE(m, nullptr);
  std::vector<float> av = RandomFloats(rows * cols, 7), cv(rows * cols, NAN), sv(1, NAN);
  m->Run({av.data(), cv.data(), sv.data()});
  for (int64_t x = 0; x < rows; ++x) {
    for (int64_t y = 0; y < cols; ++y) ASSERT_EQ(cv[x * cols + y], av[x * cols + cols - 1 - y]);
  }
  float want = 0;
  for (int64_t x = 0; x < big; ++x) want += static_cast<float>(x);
  EXPECT_EQ(sv[0], want);
}

TEST(CodegenHost, Float16LoadsStoresAndCasts) {
  constexpr int64_t n = 4096;
  BufferPtr a = MakeBuffer("A", DType::kFloat16, {n});
  BufferPtr c = MakeBuffer("C", DType::kFloat16, {n});
  BufferPtr d = MakeBuffer("D", DType::kFloat32, {n});
  VarPtr i = MakeVar("i");
  Expr x = MakeLoad(a, {i});  // f16, computed in f32
  Stmt body = Loop(
      i, n,
      MakeSeq({MakeStore(c, {i},
                         x * MakeFloat(1.5, DType::kFloat16) + MakeFloat(0.25, DType::kFloat16)),
               MakeStore(d, {i},
                         MakeCast(DType::kFloat32,
                                  MakeCast(DType::kFloat16,
                                           MakeCast(DType::kFloat32, x) * MakeFloat(3.1))))}));
  Program p = HostProgram(
      "half_ops", {{a, BufferRole::kInput}, {c, BufferRole::kOutput}, {d, BufferRole::kOutput}},
      body);
  auto m = GenerateAndLoad(p);
  ASSERT_NE(m, nullptr);
  // Inputs cover normal, subnormal, large (overflowing when scaled) and special values.
  std::vector<float> vals = RandomFloats(n, 8, -3000.0f, 3000.0f);
  vals[0] = 0.0f;
  vals[1] = -0.0f;
  vals[2] = 3e-6f;     // subnormal in f16
  vals[3] = -6e-8f;    // smallest subnormal
  vals[4] = 65504.0f;  // f16 max: times 3.1 overflows to inf
  vals[5] = INFINITY;
  vals[6] = -INFINITY;
  for (int k = 7; k < 200; ++k) vals[k] = vals[k] * 1e-7f;  // more subnormals
  std::vector<uint16_t> av(n), cv(n, 0x7e00);
  std::vector<float> dv(n, NAN);
  for (int64_t k = 0; k < n; ++k) av[k] = F16Bits(static_cast<_Float16>(vals[k]));
  m->Run({av.data(), cv.data(), dv.data()});
  for (int64_t k = 0; k < n; ++k) {
    const float in = F16Value(av[k]);
    const _Float16 want_c = static_cast<_Float16>(in * 1.5f + 0.25f);
    ASSERT_EQ(cv[k], F16Bits(want_c)) << k << ": " << in;
    const float want_d = static_cast<float>(static_cast<_Float16>(in * 3.1f));
    ASSERT_EQ(dv[k], want_d) << k << ": " << in;
  }
}

TEST(CodegenHost, BFloat16LoadsStoresAndCasts) {
  constexpr int64_t n = 4096;
  BufferPtr a = MakeBuffer("A", DType::kBFloat16, {n});
  BufferPtr c = MakeBuffer("C", DType::kBFloat16, {n});
  BufferPtr d = MakeBuffer("D", DType::kFloat32, {n});
  VarPtr i = MakeVar("i");
  Expr x = MakeLoad(a, {i});
  Stmt body = Loop(
      i, n,
      MakeSeq({MakeStore(c, {i},
                         x * MakeFloat(1.5, DType::kBFloat16) + MakeFloat(0.25, DType::kBFloat16)),
               MakeStore(d, {i},
                         MakeCast(DType::kFloat32,
                                  MakeCast(DType::kBFloat16,
                                           MakeCast(DType::kFloat32, x) * MakeFloat(3.1))))}));
  Program p = HostProgram(
      "bf16_ops", {{a, BufferRole::kInput}, {c, BufferRole::kOutput}, {d, BufferRole::kOutput}},
      body);
  auto m = GenerateAndLoad(p);
  ASSERT_NE(m, nullptr);
  std::vector<float> vals = RandomFloats(n, 9, -1e4f, 1e4f);
  vals[0] = 0.0f;
  vals[1] = 3.0e38f;                                // times 3.1 overflows to inf
  for (int k = 2; k < 100; ++k) vals[k] *= 1e-40f;  // subnormals
  std::vector<uint16_t> av(n), cv(n, 0x7fc0);
  std::vector<float> dv(n, NAN);
  for (int64_t k = 0; k < n; ++k) av[k] = Bf16Bits(RoundToBf16(vals[k]));
  m->Run({av.data(), cv.data(), dv.data()});
  for (int64_t k = 0; k < n; ++k) {
    const float in = Bf16Value(av[k]);
    ASSERT_EQ(cv[k], Bf16Bits(RoundToBf16(in * 1.5f + 0.25f))) << k << ": " << in;
    const float want_d = std::isinf(in * 3.1f) ? in * 3.1f : RoundToBf16(in * 3.1f);
    ASSERT_EQ(dv[k], want_d) << k << ": " << in;
  }
}

TEST(CodegenHost, FloorDivisionAndModuloOfNegativeDividends) {
  constexpr int64_t n = 40;
  BufferPtr a = MakeBuffer("A", DType::kFloat32, {n});
  BufferPtr q = MakeBuffer("Q", DType::kInt32, {n});
  BufferPtr r = MakeBuffer("R", DType::kInt32, {n});
  BufferPtr u = MakeBuffer("U", DType::kInt32, {n});
  BufferPtr g = MakeBuffer("G", DType::kFloat32, {n});
  BufferPtr f = MakeBuffer("F", DType::kFloat32, {n});
  VarPtr i = MakeVar("i");
  Expr shifted = Expr(i) - 17;
  Stmt body = Loop(
      i, n,
      MakeSeq(
          {MakeStore(q, {i}, MakeCast(DType::kInt32, shifted / 5)),
           MakeStore(r, {i}, MakeCast(DType::kInt32, shifted % 5)),
           // A provably non-negative dividend gets plain C division.
           MakeStore(u, {i}, MakeCast(DType::kInt32, Expr(i) / 4 + (Expr(i) * 3 + 1) % 4)),
           // The select guards a load that is out of bounds when not chosen.
           MakeStore(g, {i}, MakeSelect(shifted >= 0, MakeLoad(a, {shifted / 2}), MakeFloat(-1.0))),
           MakeStore(
               f, {i},
               MakeBinary(BinaryOp::kMod, MakeCast(DType::kFloat32, shifted), MakeFloat(4.0)))}));
  Program p = HostProgram("floordiv",
                          {{a, BufferRole::kInput},
                           {q, BufferRole::kOutput},
                           {r, BufferRole::kOutput},
                           {u, BufferRole::kOutput},
                           {g, BufferRole::kOutput},
                           {f, BufferRole::kOutput}},
                          body);
  absl::StatusOr<GeneratedSource> src = GenerateHost(p);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_NE(src->code.find("tessel_floordiv<int>(i - 17, 5)"), std::string::npos) << src->code;
  EXPECT_NE(src->code.find("tessel_floormod<int>(i - 17, 5)"), std::string::npos) << src->code;
  EXPECT_NE(src->code.find("U[i] = i / 4 + (i * 3 + 1) % 4;"), std::string::npos) << src->code;
  auto m = GenerateAndLoad(p);
  ASSERT_NE(m, nullptr);
  std::vector<float> av = RandomFloats(n, 10), gv(n, NAN), fv(n, NAN);
  std::vector<int32_t> qv(n, -99), rv(n, -99), uv(n, -99);
  m->Run({av.data(), qv.data(), rv.data(), uv.data(), gv.data(), fv.data()});
  for (int64_t k = 0; k < n; ++k) {
    const int64_t s = k - 17;
    const int64_t fq = s >= 0 ? s / 5 : -((-s + 4) / 5);
    EXPECT_EQ(qv[k], fq) << s;
    EXPECT_EQ(rv[k], s - fq * 5) << s;
    EXPECT_EQ(uv[k], k / 4 + (k * 3 + 1) % 4) << k;
    EXPECT_EQ(gv[k], s >= 0 ? av[s / 2] : -1.0f) << s;
    EXPECT_EQ(fv[k], static_cast<float>(s - std::floor(s / 4.0) * 4)) << s;
  }
}

TEST(CodegenHost, UnrolledLoopsAndAnnotations) {
  BufferPtr c = MakeBuffer("C", DType::kFloat32, {4, 8});
  VarPtr i = MakeVar("i"), j = MakeVar("j");
  Stmt body = Loop(i, 4,
                   MakeFor(j, MakeInt(0), MakeInt(8), ForKind::kUnrolled, ThreadTag::kNone,
                           MakeStore(c, {i, j}, MakeCast(DType::kFloat32, Expr(i) * 8 + Expr(j))),
                           {{"pipeline_depth", 2}}));
  Program p = HostProgram("unrolled", {{c, BufferRole::kOutput}}, body);
  absl::StatusOr<GeneratedSource> src = GenerateHost(p);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_NE(src->code.find("#pragma GCC unroll 8\n"
                           "      for (int j = 0; j < 8; ++j) {  // pipeline_depth=2"),
            std::string::npos)
      << src->code;
  auto m = GenerateAndLoad(p);
  ASSERT_NE(m, nullptr);
  std::vector<float> cv(32, NAN);
  m->Run({cv.data()});
  for (int k = 0; k < 32; ++k) EXPECT_EQ(cv[k], static_cast<float>(k));
}

TEST(CodegenHost, ThreadBindingNeedsCuda) {
  BufferPtr c = MakeBuffer("C", DType::kFloat32, {32});
  VarPtr tx = MakeVar("tx");
  Stmt body = MakeFor(tx, MakeInt(0), MakeInt(32), ForKind::kThreadBinding, ThreadTag::kThreadX,
                      MakeStore(c, {tx}, MakeFloat(1.0)));
  Program p = HostProgram("bound", {{c, BufferRole::kOutput}}, body);
  absl::StatusOr<GeneratedSource> src = GenerateHost(p);
  ASSERT_FALSE(src.ok());
  EXPECT_EQ(src.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(src.status().message().find("thread bindings need the cuda target"), std::string::npos)
      << src.status();
  EXPECT_NE(src.status().message().find("threadIdx.x"), std::string::npos) << src.status();
}

TEST(CodegenHost, AllReduceNeedsCuda) {
  BufferPtr c = MakeBuffer("C", DType::kFloat32, {1});
  BufferPtr red = MakeBuffer("red", DType::kFloat32, {1}, MemScope::kLocal);
  Stmt body = MakeAllocate(
      red, MakeSeq({MakeAllReduce(ReduceOp::kSum, MakeFloat(1.0), red, ThreadTag::kThreadX, 32),
                    MakeStore(c, {MakeInt(0)}, MakeLoad(red, {MakeInt(0)}))}));
  Program p = HostProgram("allreduce", {{c, BufferRole::kOutput}}, body);
  absl::StatusOr<GeneratedSource> src = GenerateHost(p);
  ASSERT_FALSE(src.ok());
  EXPECT_NE(src.status().message().find("cross-thread reductions need the cuda target"),
            std::string::npos)
      << src.status();
}

TEST(CodegenHost, ProgramForTheWrongTargetIsRejected) {
  BufferPtr c = MakeBuffer("C", DType::kFloat32, {4});
  VarPtr i = MakeVar("i");
  Program p =
      HostProgram("p", {{c, BufferRole::kOutput}}, Loop(i, 4, MakeStore(c, {i}, MakeFloat(0))));
  p.target = TargetKind::kCuda;
  absl::StatusOr<GeneratedSource> src = GenerateHost(p);
  ASSERT_FALSE(src.ok());
  EXPECT_NE(src.status().message().find("lower it for the host"), std::string::npos)
      << src.status();
}

TEST(CodegenProgram, ToStringListsBuffersKernelsAndBodies) {
  BufferPtr a = MakeBuffer("A", DType::kFloat16, {4, 8});
  BufferPtr c = MakeBuffer("C", DType::kFloat32, {4, 8}, MemScope::kGlobal, {9, 1});
  VarPtr i = MakeVar("i");
  Program p = HostProgram("demo", {{a, BufferRole::kInput}, {c, BufferRole::kOutput}},
                          Loop(i, 4, MakeStore(c, {i, MakeInt(0)}, MakeLoad(a, {i, MakeInt(0)}))));
  p.kernels[0].launch.grid = {2, 1, 1};
  p.kernels[0].launch.block = {128, 1, 1};
  const std::string s = ToString(p);
  EXPECT_NE(s.find("program demo (host, 32-bit indices)"), std::string::npos) << s;
  EXPECT_NE(s.find("[0] input A: f16[4, 8]"), std::string::npos) << s;
  EXPECT_NE(s.find("[1] output C: f32[4, 8] strides [9, 1]"), std::string::npos) << s;
  EXPECT_NE(s.find("kernel demo_kernel0: grid (2, 1, 1) block (128, 1, 1) dynamic shared 0 bytes"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("  params: A, C"), std::string::npos) << s;
  EXPECT_NE(s.find("  for i in [0, 4):\n    C[i, 0] = A[i, 0]"), std::string::npos) << s;
}

}  // namespace
}  // namespace tessel::schedules
