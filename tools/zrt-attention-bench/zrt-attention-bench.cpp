//===- zrt-attention-bench.cpp - the attention kernels, timed and checked -===//
//
// Times zero.attention and attention_grad on the GPU at model shapes
// (bfloat16, causal mask, the kernels zrun runs) for each tiling the
// kernels offer, and prints TFLOP/s; first checks every tiling against the
// CPU reference (runtime/cpu/Attention.cpp) on small shapes with a causal
// and a random mask (one with a 64-row query tile that sees no key), and
// the tilings against each other at each timed shape (they must agree bit
// for bit: the same products in the same order), and each backward against
// itself run again.
// Exits non-zero if a check fails. tools/gpu-pack.sh carries it;
// docs/benchmarks.md has its figures.
//
//   zrt-attention-bench [--reps N] [--shapes llama-1b,llama-8b,...] [--tilings 0,2]
//                       [--no-checks]   (the timed shapes only, e.g. under ncu)
//
//===----------------------------------------------------------------------===//
#include "cpu/Kernels.h"
#include "cuda/CudaKernels.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace zrt;

namespace {

#define CHECK_CUDA(x)                                                                              \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "zrt-attention-bench: %s: %s\n", #x, cudaGetErrorString(e_));           \
      std::exit(2);                                                                                \
    }                                                                                              \
  } while (0)

void check(const Status &s, const char *what) {
  if (!s.isOk()) {
    std::fprintf(stderr, "zrt-attention-bench: %s: %s\n", what, s.message().c_str());
    std::exit(2);
  }
}

uint16_t toBf16(float f) { // round to nearest even
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f))
    return 0x7fc0;
  return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
float fromBf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct Shape {
  const char *name;
  int64_t b, s, h, hk, d;
};
const Shape kShapes[] = {
    {"llama-1b", 4, 1024, 32, 8, 64},  // Llama 3.2 1B: 32 heads, 8 k/v heads, D = 64
    {"llama-8b", 4, 1024, 32, 8, 128}, // Llama 3 8B: 32 heads, 8 k/v heads, D = 128
    {"gpt2-1.5b", 4, 1024, 25, 25, 64},
    {"gpt2-124m", 16, 1024, 12, 12, 64},
};

/// Host and device copies of one bf16 tensor.
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<uint16_t> host;
  void *dev = nullptr;
  DType type = DType::BF16;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t x : shape)
      n *= x;
    return n;
  }
  size_t bytes() const { return numel() * (type == DType::F32 ? 4 : 2); }
  void alloc() { CHECK_CUDA(cudaMalloc(&dev, std::max<size_t>(bytes(), 16))); }
  void upload() { CHECK_CUDA(cudaMemcpy(dev, host.data(), bytes(), cudaMemcpyHostToDevice)); }
  std::vector<float> download() const { // as float
    std::vector<float> f(numel());
    if (type == DType::F32) {
      CHECK_CUDA(cudaMemcpy(f.data(), dev, bytes(), cudaMemcpyDeviceToHost));
      return f;
    }
    std::vector<uint16_t> h(numel());
    CHECK_CUDA(cudaMemcpy(h.data(), dev, bytes(), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < h.size(); ++i)
      f[i] = fromBf16(h[i]);
    return f;
  }
  TensorRef dref() const { return TensorRef{type, shape, static_cast<char *>(dev)}; }
};

Tensor make(std::vector<int64_t> shape, DType type = DType::BF16) {
  Tensor t;
  t.shape = std::move(shape);
  t.type = type;
  t.host.assign(t.numel() * (type == DType::F32 ? 2 : 1), 0);
  t.alloc();
  return t;
}

void fillRandom(Tensor &t, uint64_t seed, float scale) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto &v : t.host) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    v = toBf16(((float)(x >> 40) / (float)(1 << 24) * 2 - 1) * scale);
  }
  t.upload();
}

/// One problem: q, k, v, the mask, dO, and the results.
struct Problem {
  int64_t b, sq, sk, h, hk, d;
  Tensor q, k, v, bias, dout, out, lse, dq, dk, dv;
  /// |mask|: causal, random, or random with query rows [64, 128) seeing no key.
  enum Mask { kCausal, kRandom, kRandomEmptyTile };
  Problem(int64_t b, int64_t s, int64_t h, int64_t hk, int64_t d, Mask mask, uint64_t seed)
      : b(b), sq(s), sk(s), h(h), hk(hk), d(d) {
    q = make({b, s, h, d}), k = make({b, s, hk, d}), v = make({b, s, hk, d});
    bias = make({1, 1, s, s}), dout = make({b, s, h, d}), out = make({b, s, h, d});
    lse = make({b, h, s}, DType::F32), dq = make({b, s, h, d}), dk = make({b, s, hk, d});
    dv = make({b, s, hk, d});
    fillRandom(q, seed, 2.0f), fillRandom(k, seed + 1, 2.0f), fillRandom(v, seed + 2, 1.0f);
    fillRandom(dout, seed + 3, 1.0f);
    uint64_t x = seed + 99;
    for (int64_t i = 0; i < s; ++i)
      for (int64_t j = 0; j < s; ++j) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        float m = mask == kCausal ? (j <= i ? 0.0f : -INFINITY)
                  : (x >> 33) % 5 == 0 || (mask == kRandomEmptyTile && i >= 64 && i < 128)
                      ? -INFINITY
                      : (float)((x >> 40) % 7) * 0.25f - 0.5f;
        bias.host[i * s + j] = toBf16(m);
      }
    bias.upload();
  }
  float scale() const { return 1.0f / std::sqrt((float)d); }
  KernelCall forward() const {
    KernelCall c;
    c.in = {q.dref(), k.dref(), v.dref(), bias.dref()};
    c.out = {out.dref(), lse.dref()};
    c.ints = {0};
    c.floats = {scale()};
    return c;
  }
  KernelCall backward() const {
    KernelCall c;
    c.in = {q.dref(), k.dref(), v.dref(), bias.dref(), out.dref(), lse.dref(), dout.dref()};
    c.out = {dq.dref(), dk.dref(), dv.dref()};
    c.ints = {0};
    c.floats = {scale()};
    return c;
  }
  /// FLOPs of the forward's two products over the mask's allowed scores
  /// (a causal mask: half of Sq x Sk), the convention FlashAttention's
  /// figures use; the backward counts 2.5 times that.
  double forwardFlops(bool causal) const {
    return 4.0 * b * h * sq * sk * d * (causal ? 0.5 : 1.0);
  }
};

/// The CPU reference's results for |p| (float).
struct Reference {
  std::vector<float> out, dq, dk, dv;
};
Reference cpuReference(const Problem &p) {
  auto host = [](const Tensor &t) {
    return TensorRef{t.type, t.shape,
                     const_cast<char *>(reinterpret_cast<const char *>(t.host.data()))};
  };
  Tensor out = p.out, lse = p.lse, dq = p.dq, dk = p.dk, dv = p.dv;
  KernelCall f;
  f.in = {host(p.q), host(p.k), host(p.v), host(p.bias)};
  f.out = {host(out), host(lse)};
  f.ints = {0};
  f.floats = {p.scale()};
  check(cpuKernel(KernelId::Attention).run(f), "CPU attention");
  KernelCall g;
  g.in = {host(p.q), host(p.k), host(p.v), host(p.bias), host(out), host(lse), host(p.dout)};
  g.out = {host(dq), host(dk), host(dv)};
  g.ints = {0};
  g.floats = {p.scale()};
  check(cpuKernel(KernelId::AttentionGrad).run(g), "CPU attention_grad");
  auto widen = [](const Tensor &t) {
    std::vector<float> f(t.numel());
    for (size_t i = 0; i < f.size(); ++i)
      f[i] = fromBf16(t.host[i]);
    return f;
  };
  return {widen(out), widen(dq), widen(dk), widen(dv)};
}

/// max |a - b| / max |b|.
double relError(const std::vector<float> &a, const std::vector<float> &b) {
  double diff = 0, mag = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) != std::isnan(b[i]))
      return INFINITY;
    if (std::isnan(b[i]))
      continue;
    diff = std::max(diff, (double)std::fabs(a[i] - b[i]));
    mag = std::max(mag, (double)std::fabs(b[i]));
  }
  return mag > 0 ? diff / mag : diff;
}

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

/// mma.sync forwards with 16 and 32 rows a warp and backward, then the
/// default: wgmma forward and backward (compute capability 9.0; mma.sync
/// elsewhere).
const AttentionTiling kTilings[] = {{1, 1, 1}, {2, 1, 1}, {0, 2, 2}};

struct Gpu {
  CudaContext ctx;
  cudaEvent_t start, stop;
  Gpu() {
    CHECK_CUDA(cudaStreamCreate(&ctx.stream));
    CHECK_CUDA(cudaEventCreate(&start));
    CHECK_CUDA(cudaEventCreate(&stop));
  }
  void run(const Problem &p, AttentionTiling t, bool backward) {
    check(launchAttention(backward, backward ? p.backward() : p.forward(), ctx, t),
          backward ? "attention_grad" : "attention");
  }
  /// Milliseconds per call, the median of |reps| timed calls.
  double time(const Problem &p, AttentionTiling t, bool backward, int reps) {
    for (int i = 0; i < 3; ++i)
      run(p, t, backward);
    std::vector<float> ms;
    for (int i = 0; i < reps; ++i) {
      CHECK_CUDA(cudaEventRecord(start, ctx.stream));
      run(p, t, backward);
      CHECK_CUDA(cudaEventRecord(stop, ctx.stream));
      CHECK_CUDA(cudaEventSynchronize(stop));
      float x;
      CHECK_CUDA(cudaEventElapsedTime(&x, start, stop));
      ms.push_back(x);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }
};

std::string name(AttentionTiling t) {
  return t.fwdKernel == 2 ? "forward wgmma"
                          : "forward " + std::to_string(16 * t.fwdRows) + " rows a warp";
}

} // namespace

int main(int argc, char **argv) {
  int reps = 20;
  std::string only, tilings; // tilings: indices into kTilings, all if empty
  bool checks = true;        // --no-checks (for a profiler): the timed shapes only
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--shapes" && i + 1 < argc)
      only = argv[++i];
    else if (a == "--tilings" && i + 1 < argc)
      tilings = argv[++i];
    else if (a == "--no-checks")
      checks = false;
    else {
      std::fprintf(stderr, "usage: zrt-attention-bench [--reps N] [--shapes a,b,...] "
                           "[--tilings i,j,...] [--no-checks]\n");
      return 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("zrt-attention-bench: no CUDA device\n");
    return 0;
  }
  std::vector<AttentionTiling> chosen;
  for (size_t i = 0; i < std::size(kTilings); ++i)
    if (tilings.empty() ||
        ("," + tilings + ",").find("," + std::to_string(i) + ",") != std::string::npos)
      chosen.push_back(kTilings[i]);
  Gpu gpu;
  bool ok = true;
  // Every tiling against the CPU reference: odd lengths (edge tiles),
  // grouped k/v heads, causal and random masks, D = 64 and 128; dq, dk and
  // dv hold NaN before each backward, so a row it does not write fails.
  struct Small {
    int64_t b, s, h, hk, d;
    Problem::Mask mask;
  } smalls[] = {{2, 200, 4, 2, 64, Problem::kCausal},
                {1, 130, 4, 4, 64, Problem::kRandom},
                {1, 200, 4, 2, 128, Problem::kCausal},
                {1, 77, 2, 1, 128, Problem::kRandom},
                {2, 200, 4, 2, 64, Problem::kRandomEmptyTile},
                {1, 130, 4, 1, 128, Problem::kRandomEmptyTile}};
  const char *maskName[] = {"causal", "random mask", "random mask, a tile seeing no key"};
  for (const Small &c : smalls) {
    if (!checks)
      break;
    Problem p(c.b, c.s, c.h, c.hk, c.d, c.mask, 7);
    Reference ref = cpuReference(p);
    for (AttentionTiling t : chosen) {
      gpu.run(p, t, false);
      for (const Tensor *x : {&p.dq, &p.dk, &p.dv})
        CHECK_CUDA(cudaMemset(x->dev, 0xff, x->bytes()));
      gpu.run(p, t, true);
      CHECK_CUDA(cudaStreamSynchronize(gpu.ctx.stream));
      double e[4] = {relError(p.out.download(), ref.out), relError(p.dq.download(), ref.dq),
                     relError(p.dk.download(), ref.dk), relError(p.dv.download(), ref.dv)};
      double worst = *std::max_element(e, e + 4);
      bool pass = worst <= 2e-2;
      ok &= pass;
      std::printf("check B%lld S%lld H%lld/%lld D%lld %s, %s: out %.1e dq %.1e dk %.1e dv %.1e "
                  "vs CPU %s\n",
                  (long long)c.b, (long long)c.s, (long long)c.h, (long long)c.hk, (long long)c.d,
                  maskName[c.mask], name(t).c_str(), e[0], e[1], e[2], e[3],
                  pass ? "ok" : "FAILED");
    }
  }
  for (const Shape &s : kShapes) {
    if (!only.empty() &&
        ("," + only + ",").find("," + std::string(s.name) + ",") == std::string::npos)
      continue;
    Problem p(s.b, s.s, s.h, s.hk, s.d, Problem::kCausal, 11);
    // The first tiling's results: the other mma.sync tilings must give the
    // same bits (the same products in the same order), the wgmma forward
    // (its own products' order) and the backward after it within 1e-2 of
    // the largest; and the backward run again the same bits.
    std::vector<float> first[4];
    for (AttentionTiling t : chosen) {
      double fwd = gpu.time(p, t, false, reps), bwd = gpu.time(p, t, true, reps);
      gpu.run(p, t, false);
      gpu.run(p, t, true);
      CHECK_CUDA(cudaStreamSynchronize(gpu.ctx.stream));
      std::vector<float> got[4] = {p.out.download(), p.dq.download(), p.dk.download(),
                                   p.dv.download()};
      gpu.run(p, t, true);
      CHECK_CUDA(cudaStreamSynchronize(gpu.ctx.stream));
      bool repeats = sameBits(p.dq.download(), got[1]) && sameBits(p.dk.download(), got[2]);
      bool same = repeats;
      if (first[0].empty())
        std::copy(got, got + 4, first);
      for (int i = 0; i < 4; ++i)
        same &= t.fwdKernel == 2 || t.bwdKernel == 2 ? relError(got[i], first[i]) <= 1e-2
                                                     : sameBits(got[i], first[i]);
      ok &= same;
      double flops = p.forwardFlops(true);
      std::printf("%-10s B%lld S%lld H%lld/%lld D%lld causal, %s: forward %.3f ms %.0f TFLOP/s, "
                  "backward %.3f ms %.0f TFLOP/s%s\n",
                  s.name, (long long)s.b, (long long)s.s, (long long)s.h, (long long)s.hk,
                  (long long)s.d, name(t).c_str(), fwd, flops / fwd / 1e9, bwd,
                  2.5 * flops / bwd / 1e9,
                  !repeats ? "  NOT REPRODUCIBLE: a second run differs"
                  : same   ? ""
                           : "  RESULTS DIFFER from the first tiling");
    }
  }
  std::printf("zrt-attention-bench: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
