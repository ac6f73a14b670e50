// AdamW's update kernel (bf16 gradient, bf16 copy) timed alone, in variants of the same
// arithmetic: new arrays or in place, with or without the per-block sums of squares (the
// kernel only: not the reduction of those sums, runtime/cuda/Optimizer.cu), the step's
// scalars per thread or per block, the grid, against a copy of the same bytes; then once
// after 200 bf16 GEMMs (a step's backward). docs/benchmarks.md. Built by CMake with the
// CUDA backend: build/bench/adamw-bench
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <vector>
#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e = (x);                                                                           \
    if (e != cudaSuccess) {                                                                        \
      printf("%s: %s\n", #x, cudaGetErrorString(e));                                               \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)
__device__ __forceinline__ float toF(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ __nv_bfloat16 fromF(float v) { return __float2bfloat16_rn(v); }
struct Sc {
  float decay, stepSize, bc2Sqrt, w1, fb2, w2, feps;
};
__device__ __forceinline__ Sc scalars(const float *lrp, const float *stepp, double b1, double b2,
                                      double eps, double wd) {
  double lr = *lrp, t = *stepp;
  Sc s;
  s.decay = (float)(1.0 - lr * wd);
  double bc1 = 1.0 - pow(b1, t), bc2 = 1.0 - pow(b2, t);
  s.stepSize = (float)(lr / bc1);
  s.bc2Sqrt = (float)sqrt(bc2);
  s.w1 = (float)(1.0 - b1);
  s.fb2 = (float)b2;
  s.w2 = (float)(1.0 - b2);
  s.feps = (float)eps;
  return s;
}
__device__ __forceinline__ void upd(const Sc &s, float &pk, float gk, float &mk, float &vk) {
  pk = __fmul_rn(pk, s.decay);
  mk = __fadd_rn(mk, __fmul_rn(s.w1, __fsub_rn(gk, mk)));
  vk = __fadd_rn(__fmul_rn(vk, s.fb2), __fmul_rn(__fmul_rn(s.w2, gk), gk));
  float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vk), s.bc2Sqrt), s.feps);
  pk = __fsub_rn(pk, __fmul_rn(s.stepSize, __fdiv_rn(mk, denom)));
}
template <bool HINTS> __device__ __forceinline__ float4 ld4(const float *a, int64_t k) {
  if constexpr (HINTS)
    return __ldcs(reinterpret_cast<const float4 *>(a) + k);
  else
    return reinterpret_cast<const float4 *>(a)[k];
}
template <bool HINTS> __device__ __forceinline__ void st4(float *a, int64_t k, float4 v) {
  if constexpr (HINTS)
    __stcs(reinterpret_cast<float4 *>(a) + k, v);
  else
    reinterpret_cast<float4 *>(a)[k] = v;
}
template <bool HINTS, bool G8>
__device__ __forceinline__ float4 ldg(const __nv_bfloat16 *g, int64_t k) {
  if constexpr (G8) {
    uint2 u = HINTS ? __ldcs(reinterpret_cast<const uint2 *>(g) + k)
                    : reinterpret_cast<const uint2 *>(g)[k];
    const __nv_bfloat16 *h = reinterpret_cast<const __nv_bfloat16 *>(&u);
    return make_float4(toF(h[0]), toF(h[1]), toF(h[2]), toF(h[3]));
  } else
    return make_float4(toF(g[4 * k]), toF(g[4 * k + 1]), toF(g[4 * k + 2]), toF(g[4 * k + 3]));
}
// V0: the kernel as it is in runtime/cuda/Optimizer.cu (scalars per thread, a block per 1024
// elements); HOIST: the scalars once per block (shared memory).
template <bool HOIST = false>
__global__ void __launch_bounds__(256)
    adamw0(const float *p, const __nv_bfloat16 *g, const float *m, const float *v, const float *lrp,
           const float *stepp, float *po, float *mo, float *vo, __nv_bfloat16 *copy, double b1,
           double b2, double eps, double wd, int64_t n, double *partial = nullptr) {
  Sc s;
  if constexpr (HOIST) {
    __shared__ Sc sh;
    if (threadIdx.x == 0)
      sh = scalars(lrp, stepp, b1, b2, eps, wd);
    __syncthreads();
    s = sh;
  } else {
    s = scalars(lrp, stepp, b1, b2, eps, wd);
  }
  double squares = 0;
  int64_t step = (int64_t)gridDim.x * blockDim.x, nv = n / 4;
  for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < nv; k += step) {
    float4 P = ld4<false>(p, k), M = ld4<false>(m, k), V = ld4<false>(v, k),
           G = ldg<false, false>(g, k);
    if (partial)
      squares += (double)__fmul_rn(G.x, G.x) + (double)__fmul_rn(G.y, G.y) +
                 (double)__fmul_rn(G.z, G.z) + (double)__fmul_rn(G.w, G.w);
    upd(s, P.x, G.x, M.x, V.x);
    upd(s, P.y, G.y, M.y, V.y);
    upd(s, P.z, G.z, M.z, V.z);
    upd(s, P.w, G.w, M.w, V.w);
    st4<false>(po, k, P);
    st4<false>(mo, k, M);
    st4<false>(vo, k, V);
    if (copy) {
      uint2 w;
      __nv_bfloat16 *h = reinterpret_cast<__nv_bfloat16 *>(&w);
      h[0] = fromF(P.x);
      h[1] = fromF(P.y);
      h[2] = fromF(P.z);
      h[3] = fromF(P.w);
      reinterpret_cast<uint2 *>(copy)[k] = w;
    }
  }
  if (partial) {
    for (int o = 16; o > 0; o >>= 1)
      squares += __shfl_xor_sync(0xffffffff, squares, o);
    __shared__ double warps[8];
    if ((threadIdx.x & 31) == 0)
      warps[threadIdx.x >> 5] = squares;
    __syncthreads();
    if (threadIdx.x == 0) {
      double t = 0;
      for (int w = 0; w < 8; ++w)
        t += warps[w];
      partial[blockIdx.x] = t;
    }
  }
}
// Plain streaming copy of the same bytes (28 B an element: 14 B read, 14 written): the roof.
__global__ void roof(const float4 *a, const float4 *b, const float4 *c, const uint2 *d, float4 *x,
                     float4 *y, float4 *z, uint2 *w, int64_t nv) {
  int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < nv; k += step) {
    float4 A = a[k], B = b[k], C = c[k];
    uint2 D = d[k];
    x[k] = A;
    y[k] = B;
    z[k] = C;
    w[k] = make_uint2(D.x ^ 1, D.y);
  }
}
int main() {
  const int64_t n = 262668288; // Llama 3.2 1B's LM head bucket
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  float *p, *m, *v, *po, *mo, *vo, *sc;
  __nv_bfloat16 *g, *cp;
  CK(cudaMalloc(&p, n * 4));
  CK(cudaMalloc(&m, n * 4));
  CK(cudaMalloc(&v, n * 4));
  CK(cudaMalloc(&po, n * 4));
  CK(cudaMalloc(&mo, n * 4));
  CK(cudaMalloc(&vo, n * 4));
  CK(cudaMalloc(&g, n * 2));
  CK(cudaMalloc(&cp, n * 2));
  CK(cudaMalloc(&sc, 8));
  {
    std::vector<float> h(n);
    for (int64_t i = 0; i < n; ++i)
      h[i] = (float)((i * 2654435761u) % 1000003) * 1e-6f - 0.5f;
    CK(cudaMemcpy(p, h.data(), n * 4, cudaMemcpyHostToDevice));
    for (auto &x : h)
      x *= 1e-3f;
    CK(cudaMemcpy(m, h.data(), n * 4, cudaMemcpyHostToDevice));
    for (auto &x : h)
      x = x * x;
    CK(cudaMemcpy(v, h.data(), n * 4, cudaMemcpyHostToDevice));
    std::vector<__nv_bfloat16> hg(n);
    for (int64_t i = 0; i < n; ++i)
      hg[i] = __float2bfloat16((float)((i * 40503u) % 65537) * 3e-5f - 1.0f);
    CK(cudaMemcpy(g, hg.data(), n * 2, cudaMemcpyHostToDevice));
    float s2[2] = {1e-4f, 7.0f};
    CK(cudaMemcpy(sc, s2, 8, cudaMemcpyHostToDevice));
  }
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> ref;
  std::vector<uint16_t> refc;
  auto check = [&](const char *name) {
    std::vector<float> o(n);
    std::vector<uint16_t> oc(n);
    CK(cudaMemcpy(o.data(), po, n * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(oc.data(), cp, n * 2, cudaMemcpyDeviceToHost));
    if (ref.empty()) {
      ref = o;
      refc = oc;
      return "reference";
    }
    return (memcmp(o.data(), ref.data(), n * 4) == 0 && memcmp(oc.data(), refc.data(), n * 2) == 0)
               ? "same bits"
               : "DIFFER";
  };
  auto time = [&](const char *name, auto launch, bool verify = true) {
    CK(cudaMemset(cp, 0, n * 2));
    launch();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    const char *same = verify ? check(name) : "";
    std::vector<float> ts;
    for (int r = 0; r < 9; ++r) {
      cudaEventRecord(a);
      launch();
      cudaEventRecord(b);
      cudaEventSynchronize(b);
      float t;
      cudaEventElapsedTime(&t, a, b);
      ts.push_back(t);
    }
    std::sort(ts.begin(), ts.end());
    printf("%-44s %7.3f ms  %6.0f GB/s (28 B)  %s\n", name, ts[4], n * 28.0 / ts[4] / 1e6, same);
  };
  const double B1 = 0.9, B2 = 0.999, EPS = 1e-8, WD = 0.01;
  int64_t nv = n / 4;
  int full = (int)std::min<int64_t>((nv + 255) / 256, 65535 * 4);
  double *partial;
  CK(cudaMalloc(&partial, (size_t)full * 8));
  time("V0 copy, new arrays (the isolated bench)",
       [&] { adamw0<<<full, 256>>>(p, g, m, v, sc, sc + 1, po, mo, vo, cp, B1, B2, EPS, WD, n); });
  time("V0 copy + sumsq, new arrays", [&] {
    adamw0<<<full, 256>>>(p, g, m, v, sc, sc + 1, po, mo, vo, cp, B1, B2, EPS, WD, n, partial);
  });
  time(
      "V0 copy, in place (as the step)",
      [&] { adamw0<<<full, 256>>>(p, g, m, v, sc, sc + 1, p, m, v, cp, B1, B2, EPS, WD, n); },
      false);
  time(
      "V0 copy + sumsq, in place (as the step)",
      [&] {
        adamw0<<<full, 256>>>(p, g, m, v, sc, sc + 1, p, m, v, cp, B1, B2, EPS, WD, n, partial);
      },
      false);
  time(
      "hoisted copy + sumsq, in place",
      [&] {
        adamw0<true>
            <<<full, 256>>>(p, g, m, v, sc, sc + 1, p, m, v, cp, B1, B2, EPS, WD, n, partial);
      },
      false);
  time(
      "hoisted copy + sumsq, in place, 8 blocks/SM",
      [&] {
        adamw0<true>
            <<<sms * 8, 256>>>(p, g, m, v, sc, sc + 1, p, m, v, cp, B1, B2, EPS, WD, n, partial);
      },
      false);
  time(
      "roof: copy of the same bytes",
      [&] {
        roof<<<full, 256>>>((float4 *)p, (float4 *)m, (float4 *)v, (uint2 *)g, (float4 *)po,
                            (float4 *)mo, (float4 *)vo, (uint2 *)cp, nv);
      },
      false);
  // After ~300 ms of back-to-back bf16 GEMMs (the step's backward), the same kernel once.
  {
    cublasHandle_t h;
    cublasCreate(&h);
    const int N = 8192;
    __nv_bfloat16 *A, *B, *C;
    float one = 1, zero = 0;
    CK(cudaMalloc(&A, (size_t)N * N * 2));
    CK(cudaMalloc(&B, (size_t)N * N * 2));
    CK(cudaMalloc(&C, (size_t)N * N * 2));
    CK(cudaMemset(A, 0, (size_t)N * N * 2));
    CK(cudaMemset(B, 0, (size_t)N * N * 2));
    std::vector<float> ts, tg;
    for (int r = 0; r < 5; ++r) {
      cudaEventRecord(a);
      for (int i = 0; i < 200; ++i)
        cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, A, CUDA_R_16BF, N, B, CUDA_R_16BF,
                     N, &zero, C, CUDA_R_16BF, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      cudaEventRecord(b);
      cudaEventSynchronize(b);
      float t;
      cudaEventElapsedTime(&t, a, b);
      tg.push_back(t);
      cudaEventRecord(a);
      adamw0<<<full, 256>>>(p, g, m, v, sc, sc + 1, p, m, v, cp, B1, B2, EPS, WD, n, partial);
      cudaEventRecord(b);
      cudaEventSynchronize(b);
      cudaEventElapsedTime(&t, a, b);
      ts.push_back(t);
    }
    std::sort(ts.begin(), ts.end());
    std::sort(tg.begin(), tg.end());
    printf("%-44s %7.3f ms  %6.0f GB/s (28 B)  (200 GEMMs before it: %.0f ms, %.0f TFLOP/s)\n",
           "V0 copy + sumsq, in place, after GEMMs", ts[2], n * 28.0 / ts[2] / 1e6, tg[2],
           200 * 2.0 * N * N * (double)N / tg[2] / 1e9);
  }
  return 0;
}
