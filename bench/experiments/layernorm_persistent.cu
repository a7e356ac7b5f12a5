// layernorm_persistent.cu -- can a persistent, grid-synchronized LayerNorm reach copy bandwidth?
//
// Workload: X fp32 [16 x 4194304], weight/bias fp32 [4194304],
//   Y[i,j] = (X[i,j] - mean_i) * rsqrtf(var_i + 1e-5f) * weight[j] + bias[j]   (population
//   variance).
// Kernels timed (each verified against a CPU double-precision reference on all 16 rows):
//   copy                       cudaMemcpyAsync D2D of X (256 MiB read + 256 MiB write), the
//   baseline persistent_regs<G,T,E>     G co-resident CTAs x T threads, each thread keeps E floats
//   of a row in
//                              registers; per row: slice stats -> global partials -> grid barrier
//                              -> every CTA combines the G partials (Chan) -> normalize registers
//                              -> store
//   persistent_regs_pf<G,T,E>  same, but row i+1 is loaded into a second register set before row
//   i's barrier two_kernel                 chunk stats kernel + combine/normalize kernel (re-reads
//   X): today's scheme
//
// Build: nvcc -O3 -arch=sm_90 -o lnp bench/experiments/layernorm_persistent.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CK(call)                                                           \
  do {                                                                     \
    cudaError_t e_ = (call);                                               \
    if (e_ != cudaSuccess) {                                               \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, \
              cudaGetErrorString(e_));                                     \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

constexpr int ROWS = 16;
constexpr int COLS = 4194304;    // 2^22
constexpr int COLS4 = COLS / 4;  // float4 per row
constexpr float EPS = 1e-5f;
constexpr int SMS_ASSUMED = 132;  // H100 SXM; only used for __launch_bounds__ min-blocks hints
constexpr size_t X_BYTES = (size_t)ROWS * COLS * sizeof(float);     // 256 MiB
constexpr size_t V_BYTES = (size_t)COLS * sizeof(float);            // 16 MiB (weight or bias)
constexpr size_t FLUSH_BYTES = (size_t)100 << 20;                   // 100 MiB L2 flush buffer
constexpr double COMPULSORY_BYTES = 2.0 * X_BYTES + 2.0 * V_BYTES;  // 544 MiB
constexpr int MAX_G = 512;
constexpr int WARMUP = 3, ITERS = 20;
constexpr double TOL = 1e-3;

// ------------------------------------------------------------------ device helpers
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Block-wide sum; result returned to every thread. sh needs 33 floats. Safe to call back to back:
// warp 0 reads sh[0..NW) before the 2nd barrier, and sh[32] is only rewritten after the next
// call's 1st barrier, which every thread reaches only after reading sh[32].
template <int T>
__device__ __forceinline__ float block_sum(float v, float* sh) {
  constexpr int NW = T / 32;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  v = warp_sum(v);
  if (lane == 0) sh[w] = v;
  __syncthreads();
  if (w == 0) {
    float r = lane < NW ? sh[lane] : 0.f;
    r = warp_sum(r);
    if (lane == 0) sh[32] = r;
  }
  __syncthreads();
  return sh[32];
}

__device__ __forceinline__ float sum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }
__device__ __forceinline__ float sqdev4(float4 v, float m) {
  const float a = v.x - m, b = v.y - m, c = v.z - m, d = v.w - m;
  return (a * a + b * b) + (c * c + d * d);
}
__device__ __forceinline__ float4 ln4(float4 x, float4 w, float4 b, float mean, float rstd) {
  return make_float4((x.x - mean) * rstd * w.x + b.x, (x.y - mean) * rstd * w.y + b.y,
                     (x.z - mean) * rstd * w.z + b.z, (x.w - mean) * rstd * w.w + b.w);
}

// Combine n_parts partials (sum_b, M2_b) of one row, each over n_b elements, with the whole block:
// mean = sum(sum_b)/COLS; M2 = sum(M2_b + n_b*(sum_b/n_b - mean)^2)  (Chan et al.).
// Partials are read with __ldcg (L2, bypassing L1) since other CTAs wrote them during this launch.
template <int T>
__device__ __forceinline__ void combine_stats(const float2* p, int n_parts, float n_b, float* sh,
                                              float& mean, float& rstd) {
  float s = 0.f;
  for (int k = threadIdx.x; k < n_parts; k += T) s += __ldcg(p + k).x;
  mean = block_sum<T>(s, sh) * (1.f / COLS);
  float q = 0.f;
  for (int k = threadIdx.x; k < n_parts; k += T) {
    const float2 pk = __ldcg(p + k);
    const float d = pk.x / n_b - mean;
    q += pk.y + n_b * d * d;
  }
  rstd = rsqrtf(block_sum<T>(q, sh) * (1.f / COLS) + EPS);
}

// Sense/generation grid barrier. bar[0] = arrival count (always back to 0 on exit), bar[1] =
// generation. Requires all CTAs co-resident (cooperative launch).
__device__ __forceinline__ void grid_barrier(unsigned* bar, unsigned nblocks) {
  __syncthreads();
  if (threadIdx.x == 0) {
    volatile unsigned* vgen = bar + 1;
    const unsigned my_gen = *vgen;
    __threadfence();                          // release this CTA's partials; order gen read
    if (atomicAdd(bar, 1u) == nblocks - 1) {  // last arriver
      atomicExch(bar, 0u);                    // reset count before releasing anyone
      __threadfence();
      atomicAdd(bar + 1, 1u);  // open the barrier
    } else {
      while (*vgen == my_gen) __nanosleep(32);
    }
    __threadfence();  // acquire
  }
  __syncthreads();
}

// ------------------------------------------------------------------ persistent kernel
template <int V, int T>
__device__ __forceinline__ void load_regs(float4 (&v)[V], const float4* __restrict__ src) {
#pragma unroll
  for (int j = 0; j < V; ++j) v[j] = __ldcs(src + j * T);  // streaming: X is read once
}

// Min-blocks hint = CTAs per SM needed for G CTAs on 132 SMs (128->1, 256->2, 512->4).
template <int G, int T, int E, bool PF>
__global__ void __launch_bounds__(T, (G + SMS_ASSUMED - 1) / SMS_ASSUMED)
    ln_persistent(const float4* __restrict__ X, float4* __restrict__ Y,
                  const float4* __restrict__ W, const float4* __restrict__ B, float2* P,
                  unsigned* bar) {
  static_assert((long long)G * T * E == COLS, "G*T*E must equal COLS");
  static_assert(E % 4 == 0 && T % 32 == 0 && T <= 1024, "bad config");
  static_assert(!PF || E <= 16, "prefetch variant only for E <= 16");
  constexpr int V = E / 4;         // float4 per thread
  constexpr int SLICE = COLS / G;  // elements of a row owned by this CTA
  __shared__ float sh[33];
  // float4 index (within a row) of this thread's j=0 element; element j is at +j*T (coalesced).
  const size_t off = (size_t)blockIdx.x * (SLICE / 4) + threadIdx.x;
  float4 v[V];
  float4 nx[PF ? V : 1];        // prefetch register set (unused unless PF)
  load_regs<V, T>(v, X + off);  // row 0
#pragma unroll 1
  for (int r = 0; r < ROWS; ++r) {
    if constexpr (PF) {  // row r+1 in flight during stats, barrier and normalize
      if (r + 1 < ROWS) load_regs<V, T>(nx, X + (size_t)(r + 1) * COLS4 + off);
    }
    // 1) slice sum -> slice mean, then slice M2 around the slice mean (from registers).
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < V; ++j) s += sum4(v[j]);
    const float sum_b = block_sum<T>(s, sh);
    const float m_b = sum_b * (1.f / SLICE);
    float q = 0.f;
#pragma unroll
    for (int j = 0; j < V; ++j) q += sqdev4(v[j], m_b);
    const float m2_b = block_sum<T>(q, sh);
    if (threadIdx.x == 0) P[r * G + blockIdx.x] = make_float2(sum_b, m2_b);
    // 2) all partials of row r published. Partials are per row, so no second barrier is needed.
    grid_barrier(bar, G);
    // 3) every CTA redundantly combines the G partials of row r.
    float mean, rstd;
    combine_stats<T>(P + r * G, G, (float)SLICE, sh, mean, rstd);
    // 4) normalize registers, store Y.
    float4* yr = Y + (size_t)r * COLS4 + off;
#pragma unroll
    for (int j = 0; j < V; ++j)
      __stcs(yr + j * T, ln4(v[j], __ldg(W + off + j * T), __ldg(B + off + j * T), mean, rstd));
    if (r + 1 < ROWS) {
      if constexpr (PF) {
#pragma unroll
        for (int j = 0; j < V; ++j) v[j] = nx[j];
      } else {
        load_regs<V, T>(v, X + (size_t)(r + 1) * COLS4 + off);
      }
    }
  }
}

// ------------------------------------------------------------------ pipelined persistent kernel
// Row r+1's slice is copied to shared memory with cp.async while row r's grid barrier waits and
// row r is normalized from registers, so HBM is never idle at the barrier. With HINTS, weight and
// bias are loaded with an L2 evict_last policy and X / Y streamed with evict_first, so the 32 MiB
// of weight and bias stay in the 50 MiB L2 across the 16 rows.
__device__ __forceinline__ uint64_t l2_policy_last() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
  return p;
}
__device__ __forceinline__ uint64_t l2_policy_first() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}
__device__ __forceinline__ float4 ld_hint(const float4* a, uint64_t pol) {
  float4 v;
  asm volatile("ld.global.nc.L2::cache_hint.v4.f32 {%0,%1,%2,%3}, [%4], %5;"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(a), "l"(pol));
  return v;
}
__device__ __forceinline__ void st_hint(float4* a, float4 v, uint64_t pol) {
  asm volatile("st.global.L2::cache_hint.v4.f32 [%0], {%1,%2,%3,%4}, %5;" ::"l"(a), "f"(v.x),
               "f"(v.y), "f"(v.z), "f"(v.w), "l"(pol)
               : "memory");
}
__device__ __forceinline__ void cp_async16(void* smem, const void* g, uint64_t pol) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(s), "l"(g),
               "l"(pol)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit_wait() {
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;" ::: "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}

template <int G, int T, int E, bool HINTS>
__global__ void __launch_bounds__(T, (G + SMS_ASSUMED - 1) / SMS_ASSUMED)
    ln_pipe(const float4* __restrict__ X, float4* __restrict__ Y, const float4* __restrict__ W,
            const float4* __restrict__ B, float2* P, unsigned* bar) {
  static_assert((long long)G * T * E == COLS, "G*T*E must equal COLS");
  constexpr int V = E / 4;
  constexpr int SLICE = COLS / G;
  extern __shared__ float4 xs[];  // SLICE floats: this CTA's slice of the next row
  __shared__ float sh[33];
  const size_t off = (size_t)blockIdx.x * (SLICE / 4) + threadIdx.x;
  const uint64_t keep = l2_policy_last(), stream = l2_policy_first();
#pragma unroll
  for (int j = 0; j < V; ++j) cp_async16(xs + threadIdx.x + j * T, X + off + j * T, stream);
  cp_async_commit();
  float4 v[V];
#pragma unroll 1
  for (int r = 0; r < ROWS; ++r) {
    asm volatile("cp.async.wait_group 0;" ::: "memory");  // own copies only: same thread reads
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = xs[threadIdx.x + j * T];
    if (r + 1 < ROWS) {  // each thread refills exactly the slots it just read: no barrier needed
      const float4* src = X + (size_t)(r + 1) * COLS4 + off;
#pragma unroll
      for (int j = 0; j < V; ++j) cp_async16(xs + threadIdx.x + j * T, src + j * T, stream);
      cp_async_commit();
    }
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < V; ++j) s += sum4(v[j]);
    const float sum_b = block_sum<T>(s, sh);
    const float m_b = sum_b * (1.f / SLICE);
    float q = 0.f;
#pragma unroll
    for (int j = 0; j < V; ++j) q += sqdev4(v[j], m_b);
    const float m2_b = block_sum<T>(q, sh);
    if (threadIdx.x == 0) P[r * G + blockIdx.x] = make_float2(sum_b, m2_b);
    grid_barrier(bar, G);
    float mean, rstd;
    combine_stats<T>(P + r * G, G, (float)SLICE, sh, mean, rstd);
    float4* yr = Y + (size_t)r * COLS4 + off;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      if constexpr (HINTS) {
        st_hint(
            yr + j * T,
            ln4(v[j], ld_hint(W + off + j * T, keep), ld_hint(B + off + j * T, keep), mean, rstd),
            stream);
      } else {
        __stcs(yr + j * T, ln4(v[j], __ldg(W + off + j * T), __ldg(B + off + j * T), mean, rstd));
      }
    }
  }
}

// Weight slice in shared memory (loaded once), bias through L2 (evict_last, 16 MiB fits), X in
// registers; the first PF of the V float4 of row r+1 are copied to shared memory with cp.async
// before row r's barrier, the rest loaded into registers after row r is stored.
template <int G, int T, int E, int PF>
__global__ void __launch_bounds__(T, (G + SMS_ASSUMED - 1) / SMS_ASSUMED)
    ln_wsmem(const float4* __restrict__ X, float4* __restrict__ Y, const float4* __restrict__ W,
             const float4* __restrict__ B, float2* P, unsigned* bar) {
  static_assert((long long)G * T * E == COLS, "G*T*E must equal COLS");
  constexpr int V = E / 4;
  constexpr int SLICE = COLS / G;
  extern __shared__ float4 dyn[];
  float4* ws = dyn;          // V*T float4: this CTA's weight slice
  float4* pf = dyn + V * T;  // PF*T float4: prefetched part of the next row
  __shared__ float sh[33];
  const size_t off = (size_t)blockIdx.x * (SLICE / 4) + threadIdx.x;
  const uint64_t keep = l2_policy_last(), stream = l2_policy_first();
#pragma unroll
  for (int j = 0; j < V; ++j) cp_async16(ws + threadIdx.x + j * T, W + off + j * T, stream);
#pragma unroll
  for (int j = 0; j < PF; ++j) cp_async16(pf + threadIdx.x + j * T, X + off + j * T, stream);
  cp_async_commit();
  float4 v[V];
#pragma unroll
  for (int j = PF; j < V; ++j) v[j] = ld_hint(X + off + j * T, stream);
#pragma unroll 1
  for (int r = 0; r < ROWS; ++r) {
    asm volatile("cp.async.wait_group 0;" ::: "memory");  // each thread reads its own slots
#pragma unroll
    for (int j = 0; j < PF; ++j) v[j] = pf[threadIdx.x + j * T];
    if (PF > 0 && r + 1 < ROWS) {
      const float4* src = X + (size_t)(r + 1) * COLS4 + off;
#pragma unroll
      for (int j = 0; j < PF; ++j) cp_async16(pf + threadIdx.x + j * T, src + j * T, stream);
      cp_async_commit();
    }
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < V; ++j) s += sum4(v[j]);
    const float sum_b = block_sum<T>(s, sh);
    const float m_b = sum_b * (1.f / SLICE);
    float q = 0.f;
#pragma unroll
    for (int j = 0; j < V; ++j) q += sqdev4(v[j], m_b);
    const float m2_b = block_sum<T>(q, sh);
    if (threadIdx.x == 0) P[r * G + blockIdx.x] = make_float2(sum_b, m2_b);
    grid_barrier(bar, G);
    float mean, rstd;
    combine_stats<T>(P + r * G, G, (float)SLICE, sh, mean, rstd);
    float4* yr = Y + (size_t)r * COLS4 + off;
#pragma unroll
    for (int j = 0; j < V; ++j)
      st_hint(yr + j * T,
              ln4(v[j], ws[threadIdx.x + j * T], ld_hint(B + off + j * T, keep), mean, rstd),
              stream);
    if (r + 1 < ROWS) {
      const float4* src = X + (size_t)(r + 1) * COLS4 + off;
#pragma unroll
      for (int j = PF; j < V; ++j) v[j] = ld_hint(src + j * T, stream);
    }
  }
}

// ln_wsmem<.., 0> with the row's critical path shortened: one Chan (mean, M2) reduction of
// equal-count groups (one block barrier, not four), an acquire-polling grid barrier run by warp 0,
// which then combines the G partials in one L2 round trip and publishes mean and rstd (one block
// barrier).
__device__ __forceinline__ void chan_equal(float& m, float& q, float n, int o) {
  const float m2 = __shfl_xor_sync(0xffffffffu, m, o), q2 = __shfl_xor_sync(0xffffffffu, q, o);
  const float d = m2 - m;
  m = 0.5f * (m + m2);
  q = q + q2 + d * d * (0.5f * n);  // two groups of n each: n*n/(2n) = n/2
}
// Ablation switches (all true = the fast kernel): CHAN one Chan reduction (else two block sums),
// ACQ the acquire-polling barrier in warp 0 (else grid_barrier with __nanosleep), WARPCOMB warp 0
// combines in one pass (else combine_stats), HINTS L2 policies (else __ldcs/__ldg/__stcs).
template <int G, int T, int E, bool CHAN = true, bool ACQ = true, bool WARPCOMB = true,
          bool HINTS = true>
__global__ void __launch_bounds__(T, (G + SMS_ASSUMED - 1) / SMS_ASSUMED)
    ln_fast(const float4* __restrict__ X, float4* __restrict__ Y, const float4* __restrict__ W,
            const float4* __restrict__ B, float2* P, unsigned* bar) {
  static_assert((long long)G * T * E == COLS, "G*T*E must equal COLS");
  static_assert(G % 32 == 0 && G <= 1024 && T / 32 <= 32, "config");
  constexpr int V = E / 4, NW = T / 32, SLICE = COLS / G;
  extern __shared__ float4 ws[];  // this CTA's weight slice
  __shared__ float2 wpart[32];
  __shared__ float2 stats;  // mean, rstd of the current row
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const size_t off = (size_t)blockIdx.x * (SLICE / 4) + threadIdx.x;
  const uint64_t keep = l2_policy_last(), stream = l2_policy_first();
#pragma unroll
  for (int j = 0; j < V; ++j) cp_async16(ws + threadIdx.x + j * T, W + off + j * T, stream);
  cp_async_commit();
  float4 v[V];
#pragma unroll
  for (int j = 0; j < V; ++j) v[j] = ld_hint(X + off + j * T, stream);
  asm volatile("cp.async.wait_group 0;" ::: "memory");
  __syncthreads();
#pragma unroll 1
  for (int r = 0; r < ROWS; ++r) {
    float m, q;
    if constexpr (CHAN) {  // thread (mean, M2), then an equal-count tree over lanes and warps
      float s = 0.f;
#pragma unroll
      for (int j = 0; j < V; ++j) s += sum4(v[j]);
      m = s * (1.f / E);
      q = 0.f;
#pragma unroll
      for (int j = 0; j < V; ++j) q += sqdev4(v[j], m);
      float n = E;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1, n *= 2) chan_equal(m, q, n, o);
      if (lane == 0) wpart[warp] = make_float2(m, q);
      __syncthreads();
      if (warp == 0) {
        const float2 w = lane < NW ? wpart[lane] : make_float2(0.f, 0.f);
        m = w.x;
        q = w.y;
        float nn = 32.f * E;
#pragma unroll
        for (int o = 1; o < NW; o <<= 1, nn *= 2) chan_equal(m, q, nn, o);
      }
    } else {  // block sum, block mean, then block sum of squares around it (as the IR does)
      float s = 0.f;
#pragma unroll
      for (int j = 0; j < V; ++j) s += sum4(v[j]);
      m = block_sum<T>(s, &wpart[0].x) * (1.f / SLICE);
      q = 0.f;
#pragma unroll
      for (int j = 0; j < V; ++j) q += sqdev4(v[j], m);
      q = block_sum<T>(q, &wpart[0].x);
    }
    if (!ACQ) {
      if (threadIdx.x == 0) P[r * G + blockIdx.x] = make_float2(WARPCOMB ? m : m * SLICE, q);
      grid_barrier(bar, G);
    } else if (warp == 0) {
      unsigned gen = 0;
      if (lane == 0) {
        P[r * G + blockIdx.x] = make_float2(WARPCOMB ? m : m * SLICE, q);  // CTA mean|sum, M2
        asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(gen) : "l"(bar + 1) : "memory");
        unsigned old;
        asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;"
                     : "=r"(old)
                     : "l"(bar)
                     : "memory");
        if (old == G - 1) {
          asm volatile("st.relaxed.gpu.global.u32 [%0], 0;" ::"l"(bar) : "memory");
          asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(bar + 1) : "memory");
        } else {
          unsigned cur;
          do {
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];"
                         : "=r"(cur)
                         : "l"(bar + 1)
                         : "memory");
          } while (cur == gen);
        }
      }
      __syncwarp();
    }
    if constexpr (!ACQ || !WARPCOMB) __syncthreads();  // others read P after the barrier
    if (!WARPCOMB) {
      float mean, rstd;
      combine_stats<T>(P + r * G, G, (float)SLICE, &wpart[0].x, mean, rstd);
      if (threadIdx.x == 0) stats = make_float2(mean, rstd);
    } else if (warp == 0) {  // combine the G partials: lane l takes l, l+32, ...; counts SLICE
      const float2* pr = P + r * G;
      const float2 a = __ldcg(pr + lane);
      m = a.x;
      q = a.y;
      float cn = SLICE;
#pragma unroll
      for (int k = 1; k < G / 32; ++k) {
        const float2 b = __ldcg(pr + lane + 32 * k);
        const float d = b.x - m;
        const float tot = cn + SLICE;
        m += d * (SLICE / tot);
        q += b.y + d * d * (cn * SLICE / tot);
        cn = tot;
      }
#pragma unroll
      for (int o = 1; o < 32; o <<= 1, cn *= 2) chan_equal(m, q, cn, o);
      if (lane == 0) stats = make_float2(m, rsqrtf(q * (1.f / COLS) + EPS));
    }
    __syncthreads();
    const float mean = stats.x, rstd = stats.y;
    float4* yr = Y + (size_t)r * COLS4 + off;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      if constexpr (HINTS)
        st_hint(yr + j * T,
                ln4(v[j], ws[threadIdx.x + j * T], ld_hint(B + off + j * T, keep), mean, rstd),
                stream);
      else
        __stcs(yr + j * T, ln4(v[j], ws[threadIdx.x + j * T], __ldg(B + off + j * T), mean, rstd));
    }
    if (r + 1 < ROWS) {
      const float4* src = X + (size_t)(r + 1) * COLS4 + off;
#pragma unroll
      for (int j = 0; j < V; ++j) v[j] = HINTS ? ld_hint(src + j * T, stream) : __ldcs(src + j * T);
    }
  }
}

// ------------------------------------------------------------------ the IR's kernel, by parts
// ln_ir is the kernel Tessel generates from tests/data/layernorm_16x4194304_f32.grid512 (same
// loads, reductions, barriers and stores), with switches that replace one part each by the fast
// kernel's form, to find which parts of the IR cost what:
//   ROWSYNC  the __syncthreads at the top of each row (lowering's "runs repeatedly" barrier);
//   REGSUM   the squares' partial reads the block's sum from the all-reduce's register, not back
//            from global memory (__ldcg) after a __syncthreads;
//   WARPCOMB every warp combines the G partials by itself (lane l takes l, l+32, ...; shuffles
//            only), instead of a guarded 512-thread all-reduce for each of the two statistics;
//   CHAN     the block's sum and centred squares in one all-reduce of (mean, M2) pairs.
template <int T>
__device__ __forceinline__ float ir_allreduce(float v, float* scratch) {
#pragma unroll
  for (int o = 16; o >= 1; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  v = scratch[0];
#pragma unroll
  for (int w = 1; w < T / 32; ++w) v += scratch[w];
  return v;
}

__device__ __forceinline__ void ir_grid_barrier(unsigned* sync, unsigned blocks) {
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned gen, old;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(gen) : "l"(sync + 1) : "memory");
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(sync) : "memory");
    if (old == blocks - 1) {
      asm volatile("st.relaxed.gpu.global.u32 [%0], 0;" ::"l"(sync) : "memory");
      asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(sync + 1) : "memory");
    } else {
      unsigned cur;
      do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(cur) : "l"(sync + 1) : "memory");
      } while (cur == gen);
    }
  }
  __syncthreads();
}

template <int G, int T, int E, bool ROWSYNC, bool REGSUM, bool WARPCOMB, bool CHAN>
__global__ void __launch_bounds__(T)
    ln_ir(const float* __restrict__ X, const float* __restrict__ weight,
          const float* __restrict__ bias, float* __restrict__ Y, float* __restrict__ x_sum_rf,
          float* __restrict__ sq_sum_rf, unsigned* __restrict__ sync) {
  static_assert((long long)G * T * E == COLS && G % 32 == 0 && G <= T, "config");
  constexpr int V = E / 4, SLICE = COLS / G;
  constexpr float N = (float)COLS, NS = (float)SLICE;
  extern __shared__ __align__(16) unsigned char smem[];
  float* const weight_shared = reinterpret_cast<float*>(smem);
  __shared__ float red[32];
  __shared__ float2 wpart[32];
  const int b = blockIdx.x, t = threadIdx.x, lane = t & 31, warp = t >> 5;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    *reinterpret_cast<float4*>(&weight_shared[j * T * 4 + t * 4]) =
        *reinterpret_cast<const float4*>(&weight[b * SLICE + j * T * 4 + t * 4]);
  }
  __syncthreads();
  for (int r = 0; r < ROWS; ++r) {
    float xl[E];
    if (ROWSYNC) __syncthreads();
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float4 v = __ldcs(
          reinterpret_cast<const float4*>(&X[(size_t)r * COLS + b * SLICE + j * T * 4 + t * 4]));
      xl[j * 4] = v.x;
      xl[j * 4 + 1] = v.y;
      xl[j * 4 + 2] = v.z;
      xl[j * 4 + 3] = v.w;
    }
    if (CHAN) {
      float s = 0.f;
#pragma unroll
      for (int k = 0; k < E; ++k) s += xl[k];
      float m = s * (1.f / E), q = 0.f;
#pragma unroll
      for (int k = 0; k < E; ++k) q += (xl[k] - m) * (xl[k] - m);
      float n = E;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1, n *= 2) chan_equal(m, q, n, o);
      __syncthreads();
      if (lane == 0) wpart[warp] = make_float2(m, q);
      __syncthreads();
      const float2 w0 = wpart[lane < T / 32 ? lane : 0];
      m = lane < T / 32 ? w0.x : 0.f;
      q = lane < T / 32 ? w0.y : 0.f;
      float nn = 32.f * E;
#pragma unroll
      for (int o = 1; o < T / 32; o <<= 1, nn *= 2) chan_equal(m, q, nn, o);
      if (t == 0) {
        x_sum_rf[r * G + b] = m * NS;
        sq_sum_rf[r * G + b] = q;
      }
    } else {
      float acc = 0.f;
#pragma unroll
      for (int k = 0; k < E; ++k) acc += xl[k];
      const float s = ir_allreduce<T>(acc, red);
      if (t == 0) x_sum_rf[r * G + b] = s;
      __syncthreads();
      float q = 0.f;
#pragma unroll
      for (int k = 0; k < E; ++k) {
        const float m = REGSUM ? s / NS : __ldcg(&x_sum_rf[r * G + b]) / NS;
        q += (xl[k] - m) * (xl[k] - m);
      }
      q = ir_allreduce<T>(q, red);
      if (t == 0) sq_sum_rf[r * G + b] = q;
    }
    ir_grid_barrier(sync, G);
    float x_sum, sq_sum;
    if (WARPCOMB) {
      float s = 0.f;
#pragma unroll
      for (int k = 0; k < G / 32; ++k) s += __ldcg(&x_sum_rf[r * G + k * 32 + lane]);
#pragma unroll
      for (int o = 16; o >= 1; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
      x_sum = s;
      float q = 0.f;
#pragma unroll
      for (int k = 0; k < G / 32; ++k) {
        const float d = __ldcg(&x_sum_rf[r * G + k * 32 + lane]) / NS - x_sum / N;
        q += __ldcg(&sq_sum_rf[r * G + k * 32 + lane]) + NS * (d * d);
      }
#pragma unroll
      for (int o = 16; o >= 1; o /= 2) q += __shfl_xor_sync(0xffffffffu, q, o);
      sq_sum = q;
    } else {
      float acc = t < G ? __ldcg(&x_sum_rf[r * G + t]) : 0.f;
      x_sum = ir_allreduce<T>(acc, red);
      acc = 0.f;
      if (t < G) {
        const float d = __ldcg(&x_sum_rf[r * G + t]) / NS - x_sum / N;
        acc = __ldcg(&sq_sum_rf[r * G + t]) + NS * (d * d);
      }
      sq_sum = ir_allreduce<T>(acc, red);
    }
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float4 w = *reinterpret_cast<const float4*>(&weight_shared[j * T * 4 + t * 4]);
      const float4 bb = *reinterpret_cast<const float4*>(&bias[b * SLICE + j * T * 4 + t * 4]);
      const float mean = x_sum / N, rs = rsqrtf(sq_sum / N + EPS);
      __stcs(reinterpret_cast<float4*>(&Y[(size_t)r * COLS + b * SLICE + j * T * 4 + t * 4]),
             make_float4((xl[j * 4] - mean) * rs * w.x + bb.x,
                         (xl[j * 4 + 1] - mean) * rs * w.y + bb.y,
                         (xl[j * 4 + 2] - mean) * rs * w.z + bb.z,
                         (xl[j * 4 + 3] - mean) * rs * w.w + bb.w));
    }
  }
}

// ------------------------------------------------------------------ two-kernel baseline
constexpr int CHUNK = 32768, NCHUNK = COLS / CHUNK, TB = 256,
              PER_T = CHUNK / 4 / TB;  // 128 chunks, 32 float4/thread

// Kernel A: grid ROWS*NCHUNK (row-major); per chunk (sum, M2 around the chunk mean).
// Each thread folds batches of 8 float4 into running (n, mean, M2) with Chan's update.
__global__ void __launch_bounds__(TB)
    chunk_stats(const float4* __restrict__ X, float2* __restrict__ P) {
  __shared__ float sh[33];
  const float4* src = X + (size_t)blockIdx.x * (CHUNK / 4) + threadIdx.x;
  float n = 0.f, mean = 0.f, m2 = 0.f;
#pragma unroll 1
  for (int it = 0; it < PER_T / 8; ++it) {
    float4 v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = __ldcs(src + (it * 8 + j) * TB);
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) s += sum4(v[j]);
    const float mb = s * (1.f / 32.f);
    float q = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) q += sqdev4(v[j], mb);
    const float nn = n + 32.f, d = mb - mean;
    mean += d * (32.f / nn);
    m2 += q + d * d * (n * 32.f / nn);
    n = nn;
  }
  const float cs = block_sum<TB>(mean * n, sh);  // chunk sum
  const float d = mean - cs * (1.f / CHUNK);
  const float cq = block_sum<TB>(m2 + n * d * d, sh);  // chunk M2
  if (threadIdx.x == 0) P[blockIdx.x] = make_float2(cs, cq);
}

// Kernel B: each CTA recombines its row's NCHUNK partials, then normalizes its chunk (re-reading
// X).
__global__ void __launch_bounds__(TB)
    chunk_normalize(const float4* __restrict__ X, float4* __restrict__ Y,
                    const float4* __restrict__ W, const float4* __restrict__ B,
                    const float2* __restrict__ P) {
  __shared__ float sh[33];
  const int row = blockIdx.x / NCHUNK, chunk = blockIdx.x % NCHUNK;
  float mean, rstd;
  combine_stats<TB>(P + row * NCHUNK, NCHUNK, (float)CHUNK, sh, mean, rstd);
  const size_t off = (size_t)chunk * (CHUNK / 4) + threadIdx.x;
  const float4* xr = X + (size_t)row * COLS4 + off;
  float4* yr = Y + (size_t)row * COLS4 + off;
#pragma unroll 8
  for (int j = 0; j < PER_T; ++j)
    __stcs(yr + j * TB,
           ln4(__ldcs(xr + j * TB), __ldg(W + off + j * TB), __ldg(B + off + j * TB), mean, rstd));
}

// ------------------------------------------------------------------ host side
static float4 *dX, *dY, *dW, *dB, *dS;  // dS: copy destination
static float2* dP;                      // partials [ROWS][MAX_G]
static unsigned* dBar;                  // grid barrier {count, generation}
static void* dFlush;
static cudaEvent_t ev0, ev1;
static std::vector<float> hX, hY, hW, hB;
static std::vector<double> refMean, refRstd;
static int numSMs = 0, failures = 0;
static double copyMs = 0;
static bool g_reset_persisting = false;

static uint64_t rngState = 0x5eed1234abcdull;
static float urand(float lo, float hi) {  // splitmix64 -> 24-bit uniform in [lo, hi)
  uint64_t z = (rngState += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return lo + (hi - lo) * (float)((double)(z >> 40) * (1.0 / 16777216.0));
}

// 3 warm-ups, then ITERS launches each bracketed by events, L2 flushed (outside the events) before
// each.
template <class F>
static float time_median(F launch) {
  for (int i = 0; i < WARMUP; ++i) launch();
  CK(cudaDeviceSynchronize());
  std::vector<float> t;
  for (int i = 0; i < ITERS; ++i) {
    CK(cudaMemsetAsync(dFlush, i & 0xff, FLUSH_BYTES, 0));
    if (g_reset_persisting)
      CK(cudaCtxResetPersistingL2Cache());  // no persisting lines carried over
    CK(cudaEventRecord(ev0, 0));
    launch();
    CK(cudaEventRecord(ev1, 0));
    CK(cudaEventSynchronize(ev1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, ev0, ev1));
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  return 0.5f * (t[ITERS / 2 - 1] + t[ITERS / 2]);
}

// Max |Y - reference| over all ROWS x COLS; NaN counts as infinity.
static double verify_y() {
  CK(cudaMemcpy(hY.data(), dY, X_BYTES, cudaMemcpyDeviceToHost));
  double maxe = 0;
  for (int r = 0; r < ROWS; ++r) {
    const float* x = hX.data() + (size_t)r * COLS;
    const float* y = hY.data() + (size_t)r * COLS;
    for (int j = 0; j < COLS; ++j) {
      const double ref = ((double)x[j] - refMean[r]) * refRstd[r] * hW[j] + hB[j];
      double e = std::fabs((double)y[j] - ref);
      if (std::isnan(e)) e = INFINITY;
      if (e > maxe) maxe = e;
    }
  }
  return maxe;
}

static void print_row(const char* name, double ms, double bytes, double ratio, double err,
                      const std::string& regs) {
  const double gbs = bytes / (ms * 1e-3) / 1e9;
  char errs[32] = "-";
  if (err >= 0) snprintf(errs, sizeof errs, "%.3e", err);
  const bool bad = err >= 0 && !(err < TOL);
  if (bad) ++failures;
  printf("%-34s %9.3f %9.1f %7.3f %11s  %-16s%s\n", name, ms, gbs, ratio, errs, regs.c_str(),
         bad ? "  FAIL (err >= 1e-3)" : "");
  fflush(stdout);
}

template <int G, int T, int E, bool PF>
static void run_persistent() {
  char name[64];
  snprintf(name, sizeof name, "%s<%d,%d,%d>", PF ? "persistent_regs_pf" : "persistent_regs", G, T,
           E);
  auto k = ln_persistent<G, T, E, PF>;
  cudaFuncAttributes fa;
  CK(cudaFuncGetAttributes(&fa, k));
  char regs[48];
  snprintf(regs, sizeof regs, "%d (spill %dB)", fa.numRegs, (int)fa.localSizeBytes);
  int perSM = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSM, k, T, 0));
  if (perSM * numSMs < G) {
    printf("%-34s skipped: not co-resident (%d CTA/SM x %d SMs < %d)  regs %s\n", name, perSM,
           numSMs, G, regs);
    return;
  }
  CK(cudaMemset(dY, 0xFF, X_BYTES));  // NaN-fill so a kernel that writes nothing fails verification
  const float4 *x = dX, *w = dW, *b = dB;
  float4* y = dY;
  float2* p = dP;
  unsigned* bar = dBar;
  void* args[] = {(void*)&x, (void*)&y, (void*)&w, (void*)&b, (void*)&p, (void*)&bar};
  const float ms = time_median(
      [&] { CK(cudaLaunchCooperativeKernel((const void*)k, dim3(G), dim3(T), args, 0, 0)); });
  print_row(name, ms, COMPULSORY_BYTES, copyMs * (COMPULSORY_BYTES / (2.0 * X_BYTES)) / ms,
            verify_y(), regs);
}

template <int G, int T, int E, bool HINTS>
static void run_pipe(const char* tag = "", bool window = false, bool same_wb = false) {
  char name[64];
  snprintf(name, sizeof name, "pipe%s%s<%d,%d,%d>", HINTS ? "_l2hints" : "", tag, G, T, E);
  cudaStreamAttrValue attr = {};
  if (window) {
    attr.accessPolicyWindow.base_ptr = dW;
    attr.accessPolicyWindow.num_bytes = 2 * V_BYTES;
    attr.accessPolicyWindow.hitRatio = 1.0f;
    attr.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
    attr.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  }
  CK(cudaStreamSetAttribute(0, cudaStreamAttributeAccessPolicyWindow, &attr));
  auto k = ln_pipe<G, T, E, HINTS>;
  const int smem = COLS / G * 4;
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaFuncAttributes fa;
  CK(cudaFuncGetAttributes(&fa, k));
  char regs[48];
  snprintf(regs, sizeof regs, "%d (spill %dB)", fa.numRegs, (int)fa.localSizeBytes);
  int perSM = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSM, k, T, smem));
  if (perSM * numSMs < G) {
    printf("%-34s skipped: not co-resident (%d CTA/SM x %d SMs < %d)  regs %s\n", name, perSM,
           numSMs, G, regs);
    return;
  }
  CK(cudaMemset(dY, 0xFF, X_BYTES));
  const float4 *x = dX, *w = dW, *b = same_wb ? dW : dB;
  float4* y = dY;
  float2* p = dP;
  unsigned* bar = dBar;
  void* args[] = {(void*)&x, (void*)&y, (void*)&w, (void*)&b, (void*)&p, (void*)&bar};
  const float ms = time_median(
      [&] { CK(cudaLaunchCooperativeKernel((const void*)k, dim3(G), dim3(T), args, smem, 0)); });
  print_row(name, ms, COMPULSORY_BYTES, copyMs * (COMPULSORY_BYTES / (2.0 * X_BYTES)) / ms,
            same_wb ? -1.0 : verify_y(), regs);
  attr = {};
  CK(cudaStreamSetAttribute(0, cudaStreamAttributeAccessPolicyWindow, &attr));
}

template <int G, int T, int E, int PF, bool FAST = false, bool CHAN = true, bool ACQ = true,
          bool WARPCOMB = true, bool HINTS = true>
static void run_wsmem() {
  char name[80];
  snprintf(name, sizeof name, "%s<%d,%d,%d>%s%s%s%s", FAST ? "fast" : "wsmem", G, T, E,
           CHAN ? "" : "-chan", ACQ ? "" : "-acq", WARPCOMB ? "" : "-warpcomb",
           HINTS ? "" : "-hints");
  auto k = FAST ? ln_fast<G, T, E, CHAN, ACQ, WARPCOMB, HINTS> : ln_wsmem<G, T, E, PF>;
  const int smem = (E / 4 + PF) * T * 16;
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaFuncAttributes fa;
  CK(cudaFuncGetAttributes(&fa, k));
  char regs[48];
  snprintf(regs, sizeof regs, "%d (spill %dB)", fa.numRegs, (int)fa.localSizeBytes);
  int perSM = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSM, k, T, smem));
  if (perSM * numSMs < G) {
    printf("%-34s skipped: not co-resident (%d CTA/SM x %d SMs < %d)  regs %s\n", name, perSM,
           numSMs, G, regs);
    return;
  }
  CK(cudaMemset(dY, 0xFF, X_BYTES));
  const float4 *x = dX, *w = dW, *b = dB;
  float4* y = dY;
  float2* p = dP;
  unsigned* bar = dBar;
  void* args[] = {(void*)&x, (void*)&y, (void*)&w, (void*)&b, (void*)&p, (void*)&bar};
  const float ms = time_median(
      [&] { CK(cudaLaunchCooperativeKernel((const void*)k, dim3(G), dim3(T), args, smem, 0)); });
  print_row(name, ms, COMPULSORY_BYTES, copyMs * (COMPULSORY_BYTES / (2.0 * X_BYTES)) / ms,
            verify_y(), regs);
}

#ifdef LNP_IRGEN
#include "ln_ir_generated.cuh"
#endif
template <int G, int T, int E, bool ROWSYNC, bool REGSUM, bool WARPCOMB, bool CHAN, int GEN = 0>
static void run_ir() {
  char name[80];
  snprintf(name, sizeof name, "ir<%d,%d,%d>%s%s%s%s", G, T, E, ROWSYNC ? "" : "-rowsync",
           REGSUM ? "+regsum" : "", WARPCOMB ? "+warpcomb" : "", CHAN ? "+chan" : "");
  auto k = ln_ir<G, T, E, ROWSYNC, REGSUM, WARPCOMB, CHAN>;
  int smem = E * T * 4;
#ifdef LNP_IRGEN
  if (GEN) {
    k = tessel_layernorm_Y;
    smem = 131136;
    snprintf(name, sizeof name, "ir_generated");
  }
#endif
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaFuncAttributes fa;
  CK(cudaFuncGetAttributes(&fa, k));
  char regs[48];
  snprintf(regs, sizeof regs, "%d (spill %dB)", fa.numRegs, (int)fa.localSizeBytes);
  CK(cudaMemset(dY, 0xFF, X_BYTES));
  const float *x = reinterpret_cast<const float*>(dX), *w = reinterpret_cast<const float*>(dW),
              *bi = reinterpret_cast<const float*>(dB);
  float* y = reinterpret_cast<float*>(dY);
  float* ps = reinterpret_cast<float*>(dP);
  float* pq = ps + ROWS * MAX_G;
  unsigned* bar = dBar;
  void* args[] = {(void*)&x, (void*)&w, (void*)&bi, (void*)&y, (void*)&ps, (void*)&pq, (void*)&bar};
  const float ms = time_median(
      [&] { CK(cudaLaunchCooperativeKernel((const void*)k, dim3(G), dim3(T), args, smem, 0)); });
  print_row(name, ms, COMPULSORY_BYTES, copyMs * (COMPULSORY_BYTES / (2.0 * X_BYTES)) / ms,
            verify_y(), regs);
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  int coop = 0;
  CK(cudaDeviceGetAttribute(&numSMs, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, 0));
  printf("device: %s, %d SMs, cooperative launch %s\n", prop.name, numSMs, coop ? "yes" : "NO");
  printf(
      "X fp32 [%d x %d] (%.0f MiB), compulsory bytes %.0f MiB, %d timed launches (median), L2 "
      "flushed\n",
      ROWS, COLS, X_BYTES / 1048576.0, COMPULSORY_BYTES / 1048576.0, ITERS);

  // Host data: X ~ U(-1,1) + 3*row, weight ~ U(0.5,1.5), bias ~ U(-1,1); fixed seed.
  hX.resize((size_t)ROWS * COLS);
  hY.resize((size_t)ROWS * COLS);
  hW.resize(COLS);
  hB.resize(COLS);
  for (int r = 0; r < ROWS; ++r)
    for (int j = 0; j < COLS; ++j) hX[(size_t)r * COLS + j] = urand(-1.f, 1.f) + 3.f * r;
  for (int j = 0; j < COLS; ++j) hW[j] = urand(0.5f, 1.5f);
  for (int j = 0; j < COLS; ++j) hB[j] = urand(-1.f, 1.f);
  // Reference statistics in double (two-pass).
  refMean.resize(ROWS);
  refRstd.resize(ROWS);
  for (int r = 0; r < ROWS; ++r) {
    const float* x = hX.data() + (size_t)r * COLS;
    double s = 0, q = 0;
    for (int j = 0; j < COLS; ++j) s += x[j];
    const double m = s / COLS;
    for (int j = 0; j < COLS; ++j) q += (x[j] - m) * (x[j] - m);
    refMean[r] = m;
    refRstd[r] = 1.0 / std::sqrt(q / COLS + (double)EPS);
  }

  CK(cudaMalloc(&dX, X_BYTES));
  CK(cudaMalloc(&dY, X_BYTES));
  CK(cudaMalloc(&dS, X_BYTES));
  CK(cudaMalloc(&dW, 2 * V_BYTES));  // weight then bias, contiguous (one L2 window covers both)
  dB = dW + COLS4;
  CK(cudaMalloc(&dP, (size_t)ROWS * MAX_G * sizeof(float2)));
  CK(cudaMalloc(&dBar, 2 * sizeof(unsigned)));
  CK(cudaMalloc(&dFlush, FLUSH_BYTES));
  CK(cudaMemcpy(dX, hX.data(), X_BYTES, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dW, hW.data(), V_BYTES, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dB, hB.data(), V_BYTES, cudaMemcpyHostToDevice));
  CK(cudaMemset(dBar, 0, 2 * sizeof(unsigned)));  // once; the barrier leaves count at 0
  CK(cudaEventCreate(&ev0));
  CK(cudaEventCreate(&ev1));

  printf("\n%-34s %9s %9s %7s %11s  %s\n", "kernel", "median_ms", "GB/s", "x_copy", "max_abs_err",
         "regs/thread");

  // 1) copy baseline: 256 MiB read + 256 MiB write.
  copyMs = time_median([] { CK(cudaMemcpyAsync(dS, dX, X_BYTES, cudaMemcpyDeviceToDevice, 0)); });
  {
    CK(cudaMemcpy(hY.data(), dS, X_BYTES, cudaMemcpyDeviceToHost));
    const bool same = memcmp(hY.data(), hX.data(), X_BYTES) == 0;
    print_row("copy (D2D 256 MiB)", copyMs, 2.0 * X_BYTES, 1.0, same ? 0.0 : INFINITY, "-");
  }

  {  // the 1 GiB copy that tessel_bench_kernels uses as its baseline, for comparison
    void *a = nullptr, *b = nullptr;
    CK(cudaMalloc(&a, (size_t)1 << 30));
    CK(cudaMalloc(&b, (size_t)1 << 30));
    CK(cudaMemset(a, 1, (size_t)1 << 30));
    const float ms = time_median(
        [&] { CK(cudaMemcpyAsync(b, a, (size_t)1 << 30, cudaMemcpyDeviceToDevice, 0)); });
    printf("copy (D2D 1 GiB): %.3f ms = %.0f GB/s (256 MiB copy: %.0f GB/s)\n", ms,
           2.0 * (1 << 30) / (ms * 1e6), 2.0 * X_BYTES / (copyMs * 1e6));
    CK(cudaFree(a));
    CK(cudaFree(b));
  }

  // 2) persistent, grid-synchronized, row slice in registers.
  const char* only = getenv("LNP_ONLY");
  if (coop && only != nullptr && strcmp(only, "ir") == 0) {
    run_wsmem<128, 512, 64, 0, true>();
    run_ir<128, 512, 64, true, false, false, false>();
    run_ir<128, 512, 64, false, false, false, false>();
    run_ir<128, 512, 64, true, true, false, false>();
    run_ir<128, 512, 64, true, false, true, false>();
    run_ir<128, 512, 64, true, true, true, false>();
    run_ir<128, 512, 64, true, false, false, true>();
    run_ir<128, 512, 64, true, false, true, true>();
    run_ir<128, 512, 64, false, true, true, false>();
    run_ir<128, 512, 64, false, false, true, true>();
    run_ir<128, 512, 64, true, false, false, false>();
    run_ir<128, 512, 64, true, false, false, false, 1>();
    run_wsmem<128, 512, 64, 0, true>();
  } else if (!coop) {
    printf("cooperative launch unsupported: persistent kernels skipped\n");
  } else {
    run_persistent<128, 1024, 32, false>();
    run_pipe<128, 1024, 32, true>();
    run_pipe<128, 1024, 32, true>("_samewb", false, true);
    run_wsmem<128, 512, 64, 0>();
    run_wsmem<128, 512, 64, 0, true>();
    run_wsmem<128, 512, 64, 0, true, false>();
    run_wsmem<128, 512, 64, 0, true, true, false>();
    run_wsmem<128, 512, 64, 0, true, true, true, false>();
    run_wsmem<128, 512, 64, 0, true, true, true, true, false>();
    run_wsmem<128, 512, 64, 0, true, false, false, false>();
    run_wsmem<128, 512, 64, 0, true, false, true, false>();
    run_wsmem<128, 512, 64, 0, true, false, false, false, false>();
    run_wsmem<128, 512, 64, 0, true>();
    // G=264 would need cols/(264*T) integral: 2^22 has no factor 3 or 11 -> skipped.
  }

  // 3) two-kernel baseline.
  {
    cudaFuncAttributes fa, fb;
    CK(cudaFuncGetAttributes(&fa, chunk_stats));
    CK(cudaFuncGetAttributes(&fb, chunk_normalize));
    char regs[48];
    snprintf(regs, sizeof regs, "%d/%d (spill %d/%dB)", fa.numRegs, fb.numRegs,
             (int)fa.localSizeBytes, (int)fb.localSizeBytes);
    CK(cudaMemset(dY, 0xFF, X_BYTES));
    const float ms = time_median([] {
      chunk_stats<<<ROWS * NCHUNK, TB>>>(dX, dP);
      CK(cudaGetLastError());
      chunk_normalize<<<ROWS * NCHUNK, TB>>>(dX, dY, dW, dB, dP);
      CK(cudaGetLastError());
    });
    print_row("two_kernel (stats + normalize)", ms, COMPULSORY_BYTES,
              copyMs * (COMPULSORY_BYTES / (2.0 * X_BYTES)) / ms, verify_y(), regs);
  }

  printf(
      "\nGB/s: bytes / median time (copy: 512 MiB moved; others: 544 MiB compulsory = X + Y + "
      "weight + bias).\n"
      "x_copy: kernel GB/s / copy GB/s = (copy_ms * 544/512) / kernel_ms.\n");
  CK(cudaDeviceSynchronize());
  if (failures) printf("%d kernel(s) FAILED verification\n", failures);
  return failures ? 1 : 0;
}
