// The ceiling of mma.sync.m16n8k16 (f16 in, f32 accumulate) on this GPU: every warp issues
// independent HMMAs on register operands in a loop, no memory traffic. Prints TFLOP/s for a few
// warps-per-SM counts. Build: nvcc -O3 -arch=sm_90 mma_sync_peak.cu -o mma_sync_peak
#include <cuda_runtime.h>
#include <cstdio>

__global__ void Peak(float* out, int iters) {
  unsigned a[4] = {threadIdx.x, threadIdx.x + 1, threadIdx.x + 2, threadIdx.x + 3};
  unsigned b[2] = {threadIdx.x * 3, threadIdx.x * 5};
  float c[16][4] = {};
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
          "{%8,%9}, {%0,%1,%2,%3};"
          : "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
  }
  float s = 0;
  for (int j = 0; j < 16; ++j) s += c[j][0] + c[j][1] + c[j][2] + c[j][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  float* out;
  cudaMalloc(&out, sizeof(float) * sms * 8 * 1024);
  const int iters = 4096;
  for (int warps : {4, 8, 16}) {
    cudaEvent_t s, e;
    cudaEventCreate(&s);
    cudaEventCreate(&e);
    Peak<<<sms * 2, warps * 32>>>(out, iters);
    cudaEventRecord(s);
    Peak<<<sms * 2, warps * 32>>>(out, iters);
    cudaEventRecord(e);
    cudaEventSynchronize(e);
    float ms = 0;
    cudaEventElapsedTime(&ms, s, e);
    double flops = 2.0 * 16 * 8 * 16 * 16.0 * iters * warps * sms * 2;
    std::printf("mma.sync m16n8k16 f32acc: %d warps/block, 2 blocks/SM: %.1f TFLOP/s (%s)\n", warps,
                flops / ms / 1e9, cudaGetErrorString(cudaGetLastError()));
  }
  return 0;
}
