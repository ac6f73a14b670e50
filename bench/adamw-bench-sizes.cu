//===- adamw-bench-sizes.cu - AdamW variants at per-parameter sizes -------===//
//
// bench/adamw-bench.cu times one bucket-sized update; this one the sizes a
// per-parameter update (zcc --optimizer-in-backward) sees (docs/benchmarks.md,
// AdamW at per-parameter sizes): AdamW's update as
// runtime/cuda/Optimizer.cu ran it (v0) and variants (an 8-byte gradient
// load, the step's scalars before the loads or from a one-thread kernel,
// two vectors a thread, capped grids), timed on the sizes of Llama 3 8B's
// parameters (in place, bf16 gradient, bf16 copy, sum of squares), beside a
// device copy and a kernel that moves the same 28 bytes an element with no
// math.
//
//   built by CMake with the CUDA backend: build/bench/adamw-bench-sizes
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cuda_bf16.h>
#include <vector>
#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e = (x);                                                                           \
    if (e != cudaSuccess) {                                                                        \
      printf("%s: %s\n", #x, cudaGetErrorString(e));                                               \
      exit(2);                                                                                     \
    }                                                                                              \
  } while (0)
constexpr int kThreads = 256;
__device__ __forceinline__ float toF(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ __nv_bfloat16 toB(float v) { return __float2bfloat16_rn(v); }

struct Sc {
  float decay, stepSize, bc2Sqrt;
};
__device__ __forceinline__ Sc scalarsOf(const float *lrp, const float *stepp, double b1, double b2,
                                        double wd) {
  double lr = *lrp, t = *stepp;
  double bc1 = 1.0 - pow(b1, t), bc2 = 1.0 - pow(b2, t);
  return {(float)(1.0 - lr * wd), (float)(lr / bc1), (float)sqrt(bc2)};
}
__device__ __forceinline__ void upd(float &pk, float gk, float &mk, float &vk, Sc s, float w1,
                                    float fb2, float w2, float feps) {
  pk = __fmul_rn(pk, s.decay);
  mk = __fadd_rn(mk, __fmul_rn(w1, __fsub_rn(gk, mk)));
  vk = __fadd_rn(__fmul_rn(vk, fb2), __fmul_rn(__fmul_rn(w2, gk), gk));
  float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vk), s.bc2Sqrt), feps);
  pk = __fsub_rn(pk, __fmul_rn(s.stepSize, __fdiv_rn(mk, denom)));
}
__device__ __forceinline__ void blockPartial(double squares, double *partial) {
  for (int o = 16; o > 0; o >>= 1)
    squares += __shfl_xor_sync(0xffffffff, squares, o);
  __shared__ double warps[kThreads / 32];
  if ((threadIdx.x & 31) == 0)
    warps[threadIdx.x >> 5] = squares;
  __syncthreads();
  if (threadIdx.x == 0) {
    double s = 0;
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w)
      s += warps[w];
    partial[blockIdx.x] = s;
  }
}
// Variant 0: the shipped kernel (vector path only; 4 scalar g loads, scalars by thread 0 after
// sync). LOADG8: g as one 8-byte load.  MODE 0: scalars by thread 0 + sync; MODE 1: loads first,
// then scalars; MODE 2: scalars precomputed in sc (a device array).  U: float4s per thread per
// iteration.
template <bool LOADG8, int MODE, int U>
__global__ void adamw(const float *p, const __nv_bfloat16 *g, const float *m, const float *v,
                      const float *lrp, const float *stepp, const float *scp, float *po, float *mo,
                      float *vo, __nv_bfloat16 *copy, double *partial, double b1, double b2,
                      double eps, double wd, int64_t nv) {
  float w1 = (float)(1.0 - b1), fb2 = (float)b2, w2 = (float)(1.0 - b2), feps = (float)eps;
  __shared__ float sh[3];
  Sc s;
  double squares = 0;
  int64_t step = (int64_t)gridDim.x * blockDim.x * U;
  int64_t k0 = blockIdx.x * (int64_t)blockDim.x * U + threadIdx.x;
  float4 pk[U], mk[U], vk[U], gk[U];
  auto load = [&](int64_t k) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      int64_t kk = k + u * blockDim.x;
      if (kk < nv) {
        pk[u] = reinterpret_cast<const float4 *>(p)[kk];
        mk[u] = reinterpret_cast<const float4 *>(m)[kk];
        vk[u] = reinterpret_cast<const float4 *>(v)[kk];
        if (LOADG8) {
          uint2 raw = reinterpret_cast<const uint2 *>(g)[kk];
          const __nv_bfloat16 *h = reinterpret_cast<const __nv_bfloat16 *>(&raw);
          gk[u] = make_float4(toF(h[0]), toF(h[1]), toF(h[2]), toF(h[3]));
        } else {
          gk[u] = make_float4(toF(g[4 * kk]), toF(g[4 * kk + 1]), toF(g[4 * kk + 2]),
                              toF(g[4 * kk + 3]));
        }
      }
    }
  };
  if (MODE == 0) {
    if (threadIdx.x == 0) {
      Sc t = scalarsOf(lrp, stepp, b1, b2, wd);
      sh[0] = t.decay;
      sh[1] = t.stepSize;
      sh[2] = t.bc2Sqrt;
    }
    __syncthreads();
    s = {sh[0], sh[1], sh[2]};
  } else if (MODE == 2) {
    s = {scp[0], scp[1], scp[2]};
  }
  bool first = true;
  for (int64_t k = k0; k < nv; k += step) {
    load(k);
    if (MODE == 1 && first) {
      if (threadIdx.x == 0) {
        Sc t = scalarsOf(lrp, stepp, b1, b2, wd);
        sh[0] = t.decay;
        sh[1] = t.stepSize;
        sh[2] = t.bc2Sqrt;
      }
      __syncthreads();
      s = {sh[0], sh[1], sh[2]};
      first = false;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      int64_t kk = k + u * blockDim.x;
      if (kk >= nv)
        continue;
      float4 a = pk[u], b = mk[u], c = vk[u], d = gk[u];
      squares += (double)__fmul_rn(d.x, d.x) + (double)__fmul_rn(d.y, d.y) +
                 (double)__fmul_rn(d.z, d.z) + (double)__fmul_rn(d.w, d.w);
      upd(a.x, d.x, b.x, c.x, s, w1, fb2, w2, feps);
      upd(a.y, d.y, b.y, c.y, s, w1, fb2, w2, feps);
      upd(a.z, d.z, b.z, c.z, s, w1, fb2, w2, feps);
      upd(a.w, d.w, b.w, c.w, s, w1, fb2, w2, feps);
      reinterpret_cast<float4 *>(po)[kk] = a;
      reinterpret_cast<float4 *>(mo)[kk] = b;
      reinterpret_cast<float4 *>(vo)[kk] = c;
      uint2 o;
      __nv_bfloat16 *h = reinterpret_cast<__nv_bfloat16 *>(&o);
      h[0] = toB(a.x);
      h[1] = toB(a.y);
      h[2] = toB(a.z);
      h[3] = toB(a.w);
      reinterpret_cast<uint2 *>(copy)[kk] = o;
    }
  }
  if (MODE == 1 && first) {
    __syncthreads();
  }
  blockPartial(squares, partial);
}
__global__ void scalarsKernel(const float *lrp, const float *stepp, float *sc, double b1, double b2,
                              double wd) {
  Sc t = scalarsOf(lrp, stepp, b1, b2, wd);
  sc[0] = t.decay;
  sc[1] = t.stepSize;
  sc[2] = t.bc2Sqrt;
}
// The same bytes, trivial math: the ceiling of this access pattern.
__global__ void streamKernel(const float4 *p, const uint2 *g, const float4 *m, const float4 *v,
                             float4 *po, float4 *mo, float4 *vo, uint2 *copy, int64_t nv) {
  for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < nv;
       k += (int64_t)gridDim.x * blockDim.x) {
    float4 a = p[k], b = m[k], c = v[k];
    uint2 d = g[k];
    a.x += 1;
    b.y += 1;
    c.z += 1;
    po[k] = a;
    mo[k] = b;
    vo[k] = c;
    d.x ^= 1;
    copy[k] = d;
  }
}

int main() {
  int64_t sizes[] = {525336576, 58720256, 16777216, 4194304};
  int64_t nmax = sizes[0];
  float *p, *m, *v, *lr, *st, *sc;
  __nv_bfloat16 *g, *copy;
  double *partial;
  CK(cudaMalloc(&p, nmax * 4));
  CK(cudaMalloc(&m, nmax * 4));
  CK(cudaMalloc(&v, nmax * 4));
  CK(cudaMalloc(&g, nmax * 2));
  CK(cudaMalloc(&copy, nmax * 2));
  CK(cudaMalloc(&partial, 8 << 20));
  CK(cudaMalloc(&lr, 4));
  CK(cudaMalloc(&st, 4));
  CK(cudaMalloc(&sc, 16));
  float h[2] = {1e-4f, 3.0f};
  CK(cudaMemcpy(lr, h, 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(st, h + 1, 4, cudaMemcpyHostToDevice));
  // data: small random-ish values
  {
    std::vector<float> hp(nmax);
    uint64_t x = 88172645463325252ull;
    for (auto &e : hp) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      e = ((x >> 40) / (float)(1 << 24) - 0.5f) * 0.1f;
    }
    CK(cudaMemcpy(p, hp.data(), nmax * 4, cudaMemcpyHostToDevice));
    for (auto &e : hp)
      e = std::fabs(e) * 0.01f;
    CK(cudaMemcpy(v, hp.data(), nmax * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(m, hp.data(), nmax * 4, cudaMemcpyHostToDevice));
    std::vector<__nv_bfloat16> hg(nmax);
    for (int64_t i = 0; i < nmax; ++i)
      hg[i] = __float2bfloat16(hp[(i * 7) % nmax] * 3);
    CK(cudaMemcpy(g, hg.data(), nmax * 2, cudaMemcpyHostToDevice));
  }
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  auto timeit = [&](auto f) {
    for (int i = 0; i < 3; ++i)
      f();
    std::vector<float> ms;
    for (int i = 0; i < 15; ++i) {
      CK(cudaEventRecord(a));
      f();
      CK(cudaEventRecord(b));
      CK(cudaEventSynchronize(b));
      float t;
      CK(cudaEventElapsedTime(&t, a, b));
      ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };
  // Out of place for timing (po etc. are separate buffers would double memory: use in place like
  // the plan).
  for (int64_t n : sizes) {
    int64_t nv = n / 4;
    double bytes = 28.0 * n;
    auto blocks = [&](int64_t per) {
      return (int)std::max<int64_t>(1, std::min<int64_t>((nv + per - 1) / per, 65535 * 4));
    };
    auto report = [&](const char *name, float t) {
      printf("n=%-10lld %-34s %8.3f ms  %6.2f TB/s\n", (long long)n, name, t, bytes / t / 1e9);
    };
    float tc =
        timeit([&] { CK(cudaMemcpyAsync((char *)m, (char *)v, n * 4, cudaMemcpyDeviceToDevice)); });
    printf("n=%-10lld %-34s %8.3f ms  %6.2f TB/s (read+write)\n", (long long)n,
           "cudaMemcpy D2D 4 B/elem", tc, 2.0 * n * 4 / tc / 1e9);
    report("stream (same bytes, no math)", timeit([&] {
             streamKernel<<<blocks(kThreads), kThreads>>>((float4 *)p, (uint2 *)g, (float4 *)m,
                                                          (float4 *)v, (float4 *)p, (float4 *)m,
                                                          (float4 *)v, (uint2 *)copy, nv);
           }));
    report("v0 shipped", timeit([&] {
             adamw<false, 0, 1><<<blocks(kThreads), kThreads>>>(
                 p, g, m, v, lr, st, sc, p, m, v, copy, partial, 0.9, 0.999, 1e-8, 0.01, nv);
           }));
    report("v1 g 8-byte", timeit([&] {
             adamw<true, 0, 1><<<blocks(kThreads), kThreads>>>(
                 p, g, m, v, lr, st, sc, p, m, v, copy, partial, 0.9, 0.999, 1e-8, 0.01, nv);
           }));
    report("v2 g8 + loads before scalars", timeit([&] {
             adamw<true, 1, 1><<<blocks(kThreads), kThreads>>>(
                 p, g, m, v, lr, st, sc, p, m, v, copy, partial, 0.9, 0.999, 1e-8, 0.01, nv);
           }));
    report("v3 g8 + scalars kernel", timeit([&] {
             scalarsKernel<<<1, 1>>>(lr, st, sc, 0.9, 0.999, 0.01);
             adamw<true, 2, 1><<<blocks(kThreads), kThreads>>>(
                 p, g, m, v, lr, st, sc, p, m, v, copy, partial, 0.9, 0.999, 1e-8, 0.01, nv);
           }));
    report("v4 g8 + scalars kernel, U2", timeit([&] {
             scalarsKernel<<<1, 1>>>(lr, st, sc, 0.9, 0.999, 0.01);
             adamw<true, 2, 2><<<blocks(2 * kThreads), kThreads>>>(
                 p, g, m, v, lr, st, sc, p, m, v, copy, partial, 0.9, 0.999, 1e-8, 0.01, nv);
           }));
    report("v5 g8 + loads first, U2", timeit([&] {
             adamw<true, 1, 2><<<blocks(2 * kThreads), kThreads>>>(
                 p, g, m, v, lr, st, sc, p, m, v, copy, partial, 0.9, 0.999, 1e-8, 0.01, nv);
           }));
    for (int cap : {1024, 2048, 4096, 8192}) {
      char nm[64];
      snprintf(nm, sizeof nm, "v6 g8 + scalars once, grid %d", cap);
      int bl = std::min(blocks(kThreads), cap);
      report(nm, timeit([&] {
               adamw<true, 0, 1><<<bl, kThreads>>>(p, g, m, v, lr, st, sc, p, m, v, copy, partial,
                                                   0.9, 0.999, 1e-8, 0.01, nv);
             }));
      snprintf(nm, sizeof nm, "v7 g8 + scalars once, U2, grid %d", cap);
      report(nm, timeit([&] {
               adamw<true, 0, 2><<<bl, kThreads>>>(p, g, m, v, lr, st, sc, p, m, v, copy, partial,
                                                   0.9, 0.999, 1e-8, 0.01, nv);
             }));
    }
  }
  printf("done\n");
}
