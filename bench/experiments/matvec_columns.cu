// Which mapping streams x^T B (B row-major K x N, f16, N contiguous) at the copy bandwidth?
// Hand-written variants of skinny_contraction's VectorColumns sketch, timed with events (median of
// 30, L2 flushed), against a device-to-device copy of the same bytes timed the same way.
//   vec<U, TY, INBLOCK>: thread = 8 consecutive columns (16-byte loads) x one chunk of K/F rows,
//   U rows unrolled; TY chunks a block along threadIdx.y, summed in shared memory first when
//   INBLOCK (F/TY partials), else F partials; then a combine pass, one output a thread.
//   whole<TX, TY, G, HINT>: one kernel, no combine pass: a block owns 8 * TX columns and all of
//   K in TY chunks, summed in the block (skinny_contraction's BlockColumns sketch is this form).
//   WHOLE_ONLY=1 runs the reads and these only.
// Build and run (GPU host): nvcc -O3 -gencode arch=compute_90a,code=sm_90a matvec_columns.cu -o mv
// && ./mv
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                               \
  do {                                                                         \
    cudaError_t e = (x);                                                       \
    if (e != cudaSuccess) {                                                    \
      printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

constexpr int K = 8192, N = 8192;

template <int U, int TY, bool INBLOCK, bool NOALLOC>
__global__ void vec(const half* __restrict__ A, const half* __restrict__ B, float* __restrict__ P,
                    int F) {
  const int col_blocks = N / 8 / blockDim.x;
  const int cb = blockIdx.x % col_blocks;
  const int fb = blockIdx.x / col_blocks;
  const int c = (cb * blockDim.x + threadIdx.x) * 8;
  const int f = fb * TY + threadIdx.y;
  const int len = K / F;
  const int k0 = f * len;
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int k = k0; k < k0 + len; k += U) {
    uint4 v[U];
    float a[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint4* p = reinterpret_cast<const uint4*>(B + static_cast<size_t>(k + u) * N + c);
      if (NOALLOC) {
        asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                     : "l"(p));
      } else {
        v[u] = __ldg(p);
      }
      a[u] = __half2float(A[k + u]);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const half* h = reinterpret_cast<const half*>(&v[u]);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[j] += a[u] * __half2float(h[j]);
    }
  }
  if (INBLOCK && TY > 1) {
    __shared__ float red[TY][8][129];
#pragma unroll
    for (int j = 0; j < 8; ++j) red[threadIdx.y][j][threadIdx.x] = acc[j];
    __syncthreads();
    if (threadIdx.y == 0) {
#pragma unroll
      for (int y = 1; y < TY; ++y) {
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[j] += red[y][j][threadIdx.x];
      }
      float* out = P + static_cast<size_t>(fb) * N + c;
      reinterpret_cast<float4*>(out)[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
      reinterpret_cast<float4*>(out)[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
    }
  } else {
    float* out = P + static_cast<size_t>(f) * N + c;
    reinterpret_cast<float4*>(out)[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
    reinterpret_cast<float4*>(out)[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
  }
}

// One kernel, no combine pass: a block owns 8 * TX columns and all of K. Thread (tx, ty) reads
// groups of 8 consecutive rows (x's 8 values in one 16-byte load), G groups a step in flight, the
// groups interleaved over ty; the TY partial sums of a column are added inside the warp
// (shuffles over the lanes of equal tx), then across warps in shared memory, in a fixed order.
template <int TX, int TY, int G, int HINT>
__global__ void __launch_bounds__(TX* TY)
    whole(const half* __restrict__ A, const half* __restrict__ B, half* __restrict__ D) {
  const int c = (blockIdx.x * TX + threadIdx.x) * 8;
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int g0 = threadIdx.y * G; g0 < K / 8; g0 += TY * G) {
    uint4 v[G][8];
    uint4 x[G];
#pragma unroll
    for (int g = 0; g < G; ++g) {
      x[g] = __ldg(reinterpret_cast<const uint4*>(A) + g0 + g);
#pragma unroll
      for (int r = 0; r < 8; ++r) {
        const uint4* p =
            reinterpret_cast<const uint4*>(B + static_cast<size_t>((g0 + g) * 8 + r) * N + c);
        if (HINT == 0) {
          v[g][r] = __ldg(p);
        } else if (HINT == 1) {
          asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                       : "=r"(v[g][r].x), "=r"(v[g][r].y), "=r"(v[g][r].z), "=r"(v[g][r].w)
                       : "l"(p));
        } else {
          v[g][r] = __ldcs(p);
        }
      }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const half* xs = reinterpret_cast<const half*>(&x[g]);
#pragma unroll
      for (int r = 0; r < 8; ++r) {
        const float a = __half2float(xs[r]);
        const half* h = reinterpret_cast<const half*>(&v[g][r]);
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[j] += a * __half2float(h[j]);
      }
    }
  }
  // Lanes of one warp with equal tx: lane = ty_in_warp * TX + tx.
#pragma unroll
  for (int off = TX; off < 32; off *= 2) {
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], off);
  }
  constexpr int kWarps = TX * TY / 32;
  __shared__ float red[kWarps][TX * 8];
  const int lane = (threadIdx.y * TX + threadIdx.x) % 32;
  const int warp = (threadIdx.y * TX + threadIdx.x) / 32;
  if (lane < TX) {
#pragma unroll
    for (int j = 0; j < 8; ++j) red[warp][lane * 8 + j] = acc[j];
  }
  __syncthreads();
  const int t = threadIdx.y * TX + threadIdx.x;
  if (t < TX * 8) {
    float s = 0;
    for (int w = 0; w < kWarps; ++w) s += red[w][t];
    D[blockIdx.x * TX * 8 + t] = __float2half(s);
  }
}

__global__ void combine(const float* __restrict__ P, half* __restrict__ D, int parts) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  float s = 0;
#pragma unroll 16
  for (int f = 0; f < parts; ++f) s += P[static_cast<size_t>(f) * N + n];
  D[n] = __float2half(s);
}

// Pure reads of the matrix (the most a matrix-vector product can do): every thread loads 16-byte
// vectors grid-stride, U in flight, and folds them into one value a block.
template <int U, int HINT>
__global__ void read_all(const uint4* __restrict__ B, size_t n, unsigned* __restrict__ out) {
  unsigned acc = 0;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride * U) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint4* p = B + i + u * stride;
      if (HINT == 0) {
        v[u] = __ldg(p);
      } else if (HINT == 1) {
        asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                     : "l"(p));
      } else if (HINT == 3) {
        v[u] = __ldcs(p);
      } else {
        asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                     : "l"(p));
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x12345678u) out[blockIdx.x] = acc;
}

// Bulk copies (cp.async.bulk, the copy engine) of CHUNK bytes into STAGES shared slots, one
// thread issuing, an mbarrier a slot; the block folds each slot.
template <int STAGES, int CHUNK>
__global__ void bulk_read(const char* __restrict__ B, size_t bytes, unsigned* __restrict__ out) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) unsigned long long bar[STAGES];
  const size_t chunks = bytes / CHUNK;
  const size_t mine = (chunks + gridDim.x - 1) / gridDim.x;
  const size_t first = blockIdx.x * mine;
  const size_t last = first + mine < chunks ? first + mine : chunks;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(&bar[s]));
      asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(b));
    }
    asm volatile("fence.mbarrier_init.release.cluster;");
  }
  __syncthreads();
  auto issue = [&](size_t c, int s) {
    const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(&bar[s]));
    const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(smem + s * CHUNK));
    asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(b), "r"(CHUNK));
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
            "r"(d),
        "l"(B + c * CHUNK), "r"(CHUNK), "r"(b)
        : "memory");
  };
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES && first + s < last; ++s) issue(first + s, s);
  }
  unsigned acc = 0;
  for (size_t c = first; c < last; ++c) {
    const int s = static_cast<int>((c - first) % STAGES);
    const unsigned phase = static_cast<unsigned>(((c - first) / STAGES) & 1);
    const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(&bar[s]));
    asm volatile(
        "{ .reg .pred p; W: mbarrier.try_wait.parity.shared.b64 p, [%0], %1; @!p bra W; }" ::"r"(b),
        "r"(phase));
    const uint4* v = reinterpret_cast<const uint4*>(smem + s * CHUNK);
    for (int i = threadIdx.x; i < CHUNK / 16; i += blockDim.x) {
      const uint4 x = v[i];
      acc ^= x.x ^ x.y ^ x.z ^ x.w;
    }
    __syncthreads();
    if (threadIdx.x == 0 && c + STAGES < last) issue(c + STAGES, s);
  }
  if (acc == 0x12345678u) out[blockIdx.x] = acc;
}

struct Timer {
  cudaEvent_t a, b;
  char* flush;
  Timer() {
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    CHECK(cudaMalloc(&flush, 256 << 20));
  }
  template <class F>
  float Median(F run) {
    run();
    CHECK(cudaDeviceSynchronize());
    std::vector<float> t;
    for (int i = 0; i < 30; ++i) {
      CHECK(cudaMemsetAsync(flush, i, 256 << 20));
      CHECK(cudaEventRecord(a));
      run();
      CHECK(cudaEventRecord(b));
      CHECK(cudaEventSynchronize(b));
      float ms;
      CHECK(cudaEventElapsedTime(&ms, a, b));
      t.push_back(ms);
    }
    CHECK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
};

// The relative L2 error of the product in D against the reference.
double RelErr(const half* D, const std::vector<float>& ref) {
  std::vector<half> d(N);
  CHECK(cudaMemcpy(d.data(), D, N * 2, cudaMemcpyDeviceToHost));
  double err = 0, nrm = 0;
  for (int n = 0; n < N; ++n) {
    err += (__half2float(d[n]) - ref[n]) * (__half2float(d[n]) - ref[n]);
    nrm += ref[n] * ref[n];
  }
  return sqrt(err / nrm);
}

template <int U, int TY, bool INBLOCK, bool NOALLOC>
void Try(Timer& tm, const half* A, const half* B, float* P, half* D, int F, int TX, double copy_ms,
         const std::vector<float>& ref) {
  if (F % TY || (N / 8) % TX || (K / F) % U || TX * TY > 1024) return;
  const int parts = INBLOCK ? F / TY : F;
  const int blocks = (N / 8 / TX) * (F / TY);
  auto main_only = [&] { vec<U, TY, INBLOCK, NOALLOC><<<blocks, dim3(TX, TY)>>>(A, B, P, F); };
  auto both = [&] {
    main_only();
    combine<<<N / 256, 256>>>(P, D, parts);
  };
  const float m = tm.Median(main_only), b = tm.Median(both);
  printf(
      "F=%4d TX=%3d TY=%d U=%2d inblock=%d noalloc=%d  main %.4f ms  total %.4f ms  "
      "copy-ratio %.3f  relerr %.1e\n",
      F, TX, TY, U, INBLOCK, NOALLOC, m, b, copy_ms / (2 * b), RelErr(D, ref));
}

template <int TX, int TY, int G, int HINT>
void TryWhole(Timer& tm, const half* A, const half* B, half* D, double copy_ms,
              const std::vector<float>& ref) {
  const int blocks = N / 8 / TX;
  const float m = tm.Median([&] { whole<TX, TY, G, HINT><<<blocks, dim3(TX, TY)>>>(A, B, D); });
  printf("whole TX=%2d TY=%3d G=%d hint=%d blocks=%4d  %.4f ms  copy-ratio %.3f  relerr %.1e\n", TX,
         TY, G, HINT, blocks, m, copy_ms / (2 * m), RelErr(D, ref));
}

int main() {
  std::vector<half> hA(K), hB(static_cast<size_t>(K) * N);
  unsigned s = 12345;
  auto rnd = [&] {
    s = s * 1664525u + 1013904223u;
    return (static_cast<int>(s >> 9) % 2001 - 1000) / 1000.0f;
  };
  for (auto& x : hA) x = __float2half(rnd());
  for (auto& x : hB) x = __float2half(rnd());
  std::vector<float> ref(N, 0);
  for (int k = 0; k < K; ++k) {
    const float a = __half2float(hA[k]);
    for (int n = 0; n < N; ++n) ref[n] += a * __half2float(hB[static_cast<size_t>(k) * N + n]);
  }
  half *A, *B, *D, *C2;
  float* P;
  CHECK(cudaMalloc(&A, K * 2));
  CHECK(cudaMalloc(&B, static_cast<size_t>(K) * N * 2));
  CHECK(cudaMalloc(&C2, static_cast<size_t>(K) * N * 2));
  CHECK(cudaMalloc(&D, N * 2));
  CHECK(cudaMalloc(&P, static_cast<size_t>(1024) * N * 4));
  CHECK(cudaMemcpy(A, hA.data(), K * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(B, hB.data(), static_cast<size_t>(K) * N * 2, cudaMemcpyHostToDevice));
  Timer tm;
  const size_t bytes = static_cast<size_t>(K) * N * 2;
  const float copy =
      tm.Median([&] { CHECK(cudaMemcpyAsync(C2, B, bytes, cudaMemcpyDeviceToDevice)); });
  // copy-ratio: (matrix bytes / total) / (2 x bytes / copy) = copy / (2 total).
  printf("copy %zu bytes: %.4f ms = %.3f TB/s (read+write); matvec at copy bandwidth: %.4f ms\n",
         bytes, copy, 2 * bytes / copy / 1e9, copy / 2);
  unsigned* sink;
  CHECK(cudaMalloc(&sink, 1 << 20));
  const size_t vecs = bytes / 16;
  auto report = [&](const char* what, float ms) {
    printf("%-44s %.4f ms = %.3f TB/s read; copy-ratio %.3f\n", what, ms, bytes / ms / 1e9,
           copy / (2 * ms));
  };
  report("read U=8 ldg 132x2048", tm.Median([&] {
    read_all<8, 0><<<132 * 8, 256>>>(reinterpret_cast<const uint4*>(B), vecs, sink);
  }));
  report("read U=8 noalloc 132x2048", tm.Median([&] {
    read_all<8, 1><<<132 * 8, 256>>>(reinterpret_cast<const uint4*>(B), vecs, sink);
  }));
  report("read U=8 __ldcs 132x2048", tm.Median([&] {
    read_all<8, 3><<<132 * 8, 256>>>(reinterpret_cast<const uint4*>(B), vecs, sink);
  }));
  report("read U=16 __ldcs 132x1024", tm.Median([&] {
    read_all<16, 3><<<132 * 4, 256>>>(reinterpret_cast<const uint4*>(B), vecs, sink);
  }));
  report("read U=4 noalloc 132x2048", tm.Median([&] {
    read_all<4, 1><<<132 * 8, 256>>>(reinterpret_cast<const uint4*>(B), vecs, sink);
  }));
  report("read U=8 noalloc+L2:256B 132x2048", tm.Median([&] {
    read_all<8, 2><<<132 * 8, 256>>>(reinterpret_cast<const uint4*>(B), vecs, sink);
  }));
  report("read U=16 noalloc 132x1024", tm.Median([&] {
    read_all<16, 1><<<132 * 4, 256>>>(reinterpret_cast<const uint4*>(B), vecs, sink);
  }));
  {
    auto k1 = bulk_read<4, 32768>;
    CHECK(cudaFuncSetAttribute(k1, cudaFuncAttributeMaxDynamicSharedMemorySize, 4 * 32768));
    report("bulk 4 x 32 KiB, 132 blocks", tm.Median([&] {
      k1<<<132, 256, 4 * 32768>>>(reinterpret_cast<const char*>(B), bytes, sink);
    }));
    auto k2 = bulk_read<6, 16384>;
    CHECK(cudaFuncSetAttribute(k2, cudaFuncAttributeMaxDynamicSharedMemorySize, 6 * 16384));
    report("bulk 6 x 16 KiB, 132 blocks", tm.Median([&] {
      k2<<<132, 256, 6 * 16384>>>(reinterpret_cast<const char*>(B), bytes, sink);
    }));
    report("bulk 6 x 16 KiB, 264 blocks", tm.Median([&] {
      k2<<<264, 256, 6 * 16384>>>(reinterpret_cast<const char*>(B), bytes, sink);
    }));
    auto k3 = bulk_read<8, 8192>;
    CHECK(cudaFuncSetAttribute(k3, cudaFuncAttributeMaxDynamicSharedMemorySize, 8 * 8192));
    report("bulk 8 x 8 KiB, 264 blocks", tm.Median([&] {
      k3<<<264, 256, 8 * 8192>>>(reinterpret_cast<const char*>(B), bytes, sink);
    }));
  }
  if (getenv("WHOLE_ONLY") == nullptr) {
    for (int F : {64, 128, 256}) {
      for (int TX : {32, 64}) {
        Try<8, 1, false, true>(tm, A, B, P, D, F, TX, copy, ref);
        Try<8, 8, true, false>(tm, A, B, P, D, F, TX, copy, ref);
      }
    }
  }
  TryWhole<8, 128, 1, 1>(tm, A, B, D, copy, ref);
  TryWhole<8, 128, 2, 1>(tm, A, B, D, copy, ref);
  TryWhole<8, 64, 2, 1>(tm, A, B, D, copy, ref);
  TryWhole<8, 64, 4, 1>(tm, A, B, D, copy, ref);
  TryWhole<8, 128, 1, 2>(tm, A, B, D, copy, ref);
  TryWhole<8, 128, 2, 2>(tm, A, B, D, copy, ref);
  TryWhole<8, 128, 2, 0>(tm, A, B, D, copy, ref);
  TryWhole<4, 128, 1, 1>(tm, A, B, D, copy, ref);
  TryWhole<4, 256, 1, 1>(tm, A, B, D, copy, ref);
  TryWhole<4, 128, 2, 1>(tm, A, B, D, copy, ref);
  TryWhole<16, 64, 1, 1>(tm, A, B, D, copy, ref);
  TryWhole<16, 64, 2, 1>(tm, A, B, D, copy, ref);
  TryWhole<16, 32, 2, 1>(tm, A, B, D, copy, ref);
  TryWhole<2, 256, 1, 1>(tm, A, B, D, copy, ref);
  TryWhole<2, 512, 1, 1>(tm, A, B, D, copy, ref);
  return 0;
}
