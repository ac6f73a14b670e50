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
//   zrt-attention-bench --matrix [--dims 32,64,...] [--seqs 512,1024,...] [--reps N]
//                       [--fwd-kernel K] [--bwd-kernel K]  (AttentionTiling's kernel numbers)
//   --dkv-parts N (either form): the warp-specialised dk/dv's split of each k/v head's
//                       query heads (AttentionTiling::dkvParts; 1: none)
//     the default kernels over head dimensions x heads:k/v heads (16:16, 16:4,
//     16:2, 16:1) x lengths (16384 tokens a call) x causal or no mask, each
//     case checked on sampled rows against a double reference (sampledCheck)
//
//===----------------------------------------------------------------------===//
#include "BenchSupport.h"
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

using bench::check;
using bench::fromBf16;
using bench::toBf16;

struct Shape {
  const char *name;
  int64_t b, s, h, hk, d;
};
const Shape kShapes[] = {
    {"llama-1b", 4, 1024, 32, 8, 64},  // Llama 3.2 1B: 32 heads, 8 k/v heads, D = 64
    {"llama-8b", 4, 1024, 32, 8, 128}, // Llama 3 8B: 32 heads, 8 k/v heads, D = 128
    {"gpt2-1.5b", 4, 1024, 25, 25, 64}, {"gpt2-124m", 16, 1024, 12, 12, 64},
    {"phi3-mini", 4, 1024, 32, 32, 96}, // Phi-3-mini: 96-wide heads
    {"gemma-2b", 4, 1024, 8, 1, 256},   // Gemma 2B: 256-wide heads, multi-query
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
  /// kNone: no mask (all zeros). The structural ones give the kernels no
  /// bias (causal, a causal window of kWindow keys, none: what
  /// zero-fuse-attention makes of a constant mask); the reference still
  /// gets a bias tensor, unless the problem is too large for it.
  enum Mask {
    kCausal,
    kRandom,
    kRandomEmptyTile,
    kNone,
    kCausalAttr,
    kWindowAttr,
    kNoneAttr,
    kDocumentsAttr
  };
  static constexpr int64_t kWindow = 70;
  static bool structural(Mask m) { return m >= kCausalAttr; }
  Mask kind;
  /// Logit soft-capping (> 0; structural masks only).
  float softcap = 0;
  /// kDocumentsAttr: causal over packed documents, positions [b, s] (each
  /// token's position in its document; int64), host and device.
  std::vector<int64_t> positions;
  void *positionsDev = nullptr;
  /// |shared|: the mask, made once for many problems of one length.
  Problem(int64_t b, int64_t s, int64_t h, int64_t hk, int64_t d, Mask mask, uint64_t seed,
          const Tensor *shared = nullptr)
      : b(b), sq(s), sk(s), h(h), hk(hk), d(d), kind(mask) {
    q = make({b, s, h, d}), k = make({b, s, hk, d}), v = make({b, s, hk, d});
    dout = make({b, s, h, d}), out = make({b, s, h, d});
    lse = make({b, h, s}, DType::F32), dq = make({b, s, h, d}), dk = make({b, s, hk, d});
    dv = make({b, s, hk, d});
    fillRandom(q, seed, 2.0f), fillRandom(k, seed + 1, 2.0f), fillRandom(v, seed + 2, 1.0f);
    fillRandom(dout, seed + 3, 1.0f);
    if (mask == kDocumentsAttr)
      makeDocuments(seed);
    if (shared) { // the device copy only: sampledCheck forms a causal or no mask itself
      bias.shape = shared->shape, bias.dev = shared->dev;
    } else if (!structural(mask) || s <= 4096)
      bias = makeMask(s, mask, seed);
  }
  /// Documents of random lengths (1 to s / 2 tokens, some ending on a 64-key
  /// tile's edge), different in each batch row.
  void makeDocuments(uint64_t seed) {
    positions.assign(b * sq, 0);
    uint64_t x = seed * 31 + 5;
    for (int64_t r = 0; r < b; ++r)
      for (int64_t t = 0, pos = 0, left = 0; t < sq; ++t, --left) {
        if (left == 0) {
          x ^= x << 13, x ^= x >> 7, x ^= x << 17;
          left = (x >> 33) % 4 == 0 ? 64 - t % 64 : 1 + (int64_t)((x >> 35) % (sq / 2));
          pos = 0;
        }
        positions[r * sq + t] = pos++;
      }
    CHECK_CUDA(cudaMalloc(&positionsDev, positions.size() * 8));
    CHECK_CUDA(
        cudaMemcpy(positionsDev, positions.data(), positions.size() * 8, cudaMemcpyHostToDevice));
  }
  TensorRef positionsRef() const {
    return TensorRef{DType::I64, {b, sq}, static_cast<char *>(positionsDev)};
  }
  /// The runtime's mask kind and window (ints): 0 the bias, 1 causal, 2 none.
  int64_t maskKind() const {
    return kind == kCausalAttr || kind == kWindowAttr || kind == kDocumentsAttr ? 1
           : kind == kNoneAttr                                                  ? 2
                                                                                : 0;
  }
  int64_t documents() const { return kind == kDocumentsAttr ? 1 : 0; }
  int64_t window() const { return kind == kWindowAttr ? kWindow : 0; }
  /// Whether the forward computes every score (no mask, or one of zeros).
  bool full() const { return kind == kNone || kind == kNoneAttr; }
  /// A [1, 1, s, s] mask of kind |mask| (the host copy kept for references).
  static Tensor makeMask(int64_t s, Mask mask, uint64_t seed) {
    Tensor bias = make({1, 1, s, s});
    uint64_t x = seed + 99;
    for (int64_t i = 0; i < s; ++i)
      for (int64_t j = 0; j < s; ++j) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        float m = mask == kNone || mask == kNoneAttr       ? 0.0f
                  : mask == kCausal || mask == kCausalAttr ? (j <= i ? 0.0f : -INFINITY)
                  : mask == kWindowAttr    ? (j <= i && j > i - kWindow ? 0.0f : -INFINITY)
                  : mask == kDocumentsAttr ? (j <= i ? 0.0f : -INFINITY) // (not read)
                  : (x >> 33) % 5 == 0 || (mask == kRandomEmptyTile && i >= 64 && i < 128)
                      ? -INFINITY
                      : (float)((x >> 40) % 7) * 0.25f - 0.5f;
        bias.host[i * s + j] = toBf16(m);
      }
    bias.upload();
    return bias;
  }
  /// Frees the device copies (a shared mask stays).
  void release(bool ownMask) {
    for (Tensor *t : {&q, &k, &v, &dout, &out, &lse, &dq, &dk, &dv})
      CHECK_CUDA(cudaFree(t->dev));
    if (positionsDev)
      CHECK_CUDA(cudaFree(positionsDev));
    if (ownMask && bias.dev)
      CHECK_CUDA(cudaFree(bias.dev));
  }
  float scale() const { return 1.0f / std::sqrt((float)d); }
  std::vector<double> floats() const {
    if (softcap > 0)
      return {scale(), softcap};
    return {scale()};
  }
  KernelCall forward() const {
    KernelCall c;
    c.in = {q.dref(), k.dref(), v.dref()};
    if (maskKind() == 0)
      c.in.push_back(bias.dref());
    if (documents())
      c.in.push_back(positionsRef());
    c.out = {out.dref(), lse.dref()};
    c.ints = {0, 0, maskKind(), window(), documents()};
    c.floats = floats();
    return c;
  }
  KernelCall backward() const {
    KernelCall c;
    c.in = {q.dref(), k.dref(), v.dref()};
    if (maskKind() == 0)
      c.in.push_back(bias.dref());
    c.in.insert(c.in.end(), {out.dref(), lse.dref(), dout.dref()});
    if (documents())
      c.in.push_back(positionsRef());
    c.out = {dq.dref(), dk.dref(), dv.dref()};
    c.ints = {0, maskKind(), window(), documents()};
    c.floats = floats();
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
  // The bias tensor stands for every mask, except with soft-capping (which
  // the kernels take with structural masks only) and documents: then the
  // structural one (the CPU's documents from the same positions).
  bool capped = p.softcap > 0 || p.documents();
  TensorRef positions{DType::I64,
                      {p.b, p.sq},
                      const_cast<char *>(reinterpret_cast<const char *>(p.positions.data()))};
  KernelCall f;
  f.in = {host(p.q), host(p.k), host(p.v)};
  if (!capped)
    f.in.push_back(host(p.bias));
  if (p.documents())
    f.in.push_back(positions);
  f.out = {host(out), host(lse)};
  f.ints = capped ? std::vector<int64_t>{0, 0, p.maskKind(), p.window(), p.documents()}
                  : std::vector<int64_t>{0};
  f.floats = p.floats();
  check(cpuKernel(KernelId::Attention).run(f), "CPU attention");
  KernelCall g;
  g.in = {host(p.q), host(p.k), host(p.v)};
  if (!capped)
    g.in.push_back(host(p.bias));
  g.in.insert(g.in.end(), {host(out), host(lse), host(p.dout)});
  if (p.documents())
    g.in.push_back(positions);
  g.out = {host(dq), host(dk), host(dv)};
  g.ints = capped ? std::vector<int64_t>{0, p.maskKind(), p.window(), p.documents()}
                  : std::vector<int64_t>{0};
  g.floats = p.floats();
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

/// Checks a problem too large for the CPU reference on sampled rows, in
/// double from the bf16 inputs: out, lse and dq of a few query rows (each
/// over every key), dk and dv of a few key rows (each over every query of
/// the heads sharing its k/v head, with the GPU's lse and D = rowsum(dO * O)
/// from its out, themselves checked on the query rows). The mask is causal
/// or none. Returns the largest error relative to the sampled rows' largest
/// magnitude, per output (out, lse, dq, dk, dv).
std::vector<double> sampledCheck(const Problem &p, bool causal) {
  const int64_t S = p.sq, D = p.d, G = p.h / p.hk;
  std::vector<float> out = p.out.download(), lse = p.lse.download(), dq = p.dq.download(),
                     dk = p.dk.download(), dv = p.dv.download();
  auto at = [&](const Tensor &t, int64_t b, int64_t i, int64_t head, int64_t heads, int64_t c) {
    return (double)fromBf16(t.host[((b * S + i) * heads + head) * D + c]);
  };
  double scale = p.scale();
  auto score = [&](int64_t b, int64_t i, int64_t h, int64_t j) {
    double x = 0;
    for (int64_t c = 0; c < D; ++c)
      x += at(p.q, b, i, h, p.h, c) * at(p.k, b, j, h / G, p.hk, c);
    return x * scale;
  };
  auto dotDv = [&](int64_t b, int64_t i, int64_t h, int64_t j) { // dO_i . v_j
    double x = 0;
    for (int64_t c = 0; c < D; ++c)
      x += at(p.dout, b, i, h, p.h, c) * at(p.v, b, j, h / G, p.hk, c);
    return x;
  };
  struct Err {
    double diff = 0, mag = 0;
    void add(double got, double want) {
      diff = std::max(diff, std::isnan(got) ? INFINITY : std::fabs(got - want));
      mag = std::max(mag, std::fabs(want));
    }
    double rel() const { return mag > 0 ? diff / mag : diff; }
  } eo, el, edq, edk, edv;
  int64_t b = p.b - 1;
  auto distinct = [](std::vector<int64_t> v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
  };
  for (int64_t i : distinct({0, S / 3, S - 1}))
    for (int64_t h : distinct({0, p.h - 1})) {
      int64_t keys = causal ? i + 1 : S;
      std::vector<double> sc(keys), dp(keys);
      double mx = -INFINITY;
      for (int64_t j = 0; j < keys; ++j)
        mx = std::max(mx, sc[j] = score(b, i, h, j));
      double sum = 0;
      for (int64_t j = 0; j < keys; ++j)
        sum += sc[j] = std::exp(sc[j] - mx);
      double dsum = 0;
      std::vector<double> o(D, 0.0);
      for (int64_t j = 0; j < keys; ++j) {
        sc[j] /= sum;
        dp[j] = dotDv(b, i, h, j);
        dsum += sc[j] * dp[j];
        for (int64_t c = 0; c < D; ++c)
          o[c] += sc[j] * at(p.v, b, j, h / G, p.hk, c);
      }
      el.add(lse[(b * p.h + h) * S + i], mx + std::log(sum));
      for (int64_t c = 0; c < D; ++c) {
        eo.add(out[((b * S + i) * p.h + h) * D + c], o[c]);
        double g = 0;
        for (int64_t j = 0; j < keys; ++j)
          g += sc[j] * (dp[j] - dsum) * at(p.k, b, j, h / G, p.hk, c);
        edq.add(dq[((b * S + i) * p.h + h) * D + c], g * scale);
      }
    }
  for (int64_t j : distinct({0, S - 1}))
    for (int64_t kh : distinct({0, p.hk - 1})) {
      std::vector<double> gk(D, 0.0), gv(D, 0.0);
      for (int64_t h = kh * G; h < (kh + 1) * G; ++h)
        for (int64_t i = causal ? j : 0; i < S; ++i) {
          double pr = std::exp(score(b, i, h, j) - lse[(b * p.h + h) * S + i]);
          double rowD = 0;
          for (int64_t c = 0; c < D; ++c)
            rowD += at(p.dout, b, i, h, p.h, c) * out[((b * S + i) * p.h + h) * D + c];
          double ds = pr * (dotDv(b, i, h, j) - rowD);
          for (int64_t c = 0; c < D; ++c) {
            gv[c] += pr * at(p.dout, b, i, h, p.h, c);
            gk[c] += ds * at(p.q, b, i, h, p.h, c);
          }
        }
      for (int64_t c = 0; c < D; ++c) {
        edk.add(dk[((b * S + j) * p.hk + kh) * D + c], gk[c] * scale);
        edv.add(dv[((b * S + j) * p.hk + kh) * D + c], gv[c]);
      }
    }
  return {eo.rel(), el.rel(), edq.rel(), edk.rel(), edv.rel()};
}

/// mma.sync forwards with 16 and 32 rows a warp and backward, then the
/// default: wgmma forward and backward (compute capability 9.0; mma.sync
/// elsewhere).
const AttentionTiling kTilings[] = {{1, 1, 1}, {2, 1, 1}, {0, 2, 2}, {0, 3, 3}, {0, 3, 4}};

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

std::vector<int64_t> parseList(const std::string &text) {
  std::vector<int64_t> v;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find(',', at);
    v.push_back(std::atoll(text.substr(at, end - at).c_str()));
    at = end == std::string::npos ? text.size() : end + 1;
  }
  return v;
}

/// --matrix: every case timed with the default kernels and checked on
/// sampled rows; a line each, then the verdict.
bool runMatrix(Gpu &gpu, const std::vector<int64_t> &dims, const std::vector<int64_t> &seqs,
               int reps, AttentionTiling tiling) {
  const int64_t kHeads = 16, kTokens = 16384;
  const Tensor none; // no bias tensor: the masks are structural
  bool ok = true;
  for (int64_t s : seqs)
    for (bool causal : {true, false}) {
      // The masks as models run them: structural (no S x S bias).
      for (int64_t d : dims)
        for (int64_t hk : {kHeads, kHeads / 4, kHeads / 8, (int64_t)1}) {
          Problem p(std::max<int64_t>(1, kTokens / s), s, kHeads, hk, d,
                    causal ? Problem::kCausalAttr : Problem::kNoneAttr, 5, &none);
          double fwd = gpu.time(p, tiling, false, reps);
          double bwd = gpu.time(p, tiling, true, reps);
          gpu.run(p, tiling, false);
          for (const Tensor *x : {&p.dq, &p.dk, &p.dv})
            CHECK_CUDA(cudaMemset(x->dev, 0xff, x->bytes())); // NaN: a row not written fails
          gpu.run(p, tiling, true);
          CHECK_CUDA(cudaStreamSynchronize(gpu.ctx.stream));
          std::vector<double> e = sampledCheck(p, causal);
          double worst = *std::max_element(e.begin(), e.end());
          bool pass = worst <= 2e-2;
          ok &= pass;
          double flops = p.forwardFlops(causal);
          std::printf("matrix D%-3lld H%lld:%-2lld S%-5lld B%-2lld %-7s forward %8.3f ms %4.0f "
                      "TFLOP/s  backward %8.3f ms %4.0f TFLOP/s  sampled out %.1e lse %.1e dq "
                      "%.1e dk %.1e dv %.1e %s\n",
                      (long long)d, (long long)kHeads, (long long)hk, (long long)s, (long long)p.b,
                      causal ? "causal" : "no-mask", fwd, flops / fwd / 1e9, bwd,
                      2.5 * flops / bwd / 1e9, e[0], e[1], e[2], e[3], e[4],
                      pass ? "ok" : "FAILED");
          std::fflush(stdout);
          p.release(false);
        }
    }
  std::printf("zrt-attention-bench: %s\n", ok ? "ok" : "FAILED");
  return ok;
}

std::string name(AttentionTiling t) {
  const char *bwd[] = {"",
                       "",
                       "",
                       ", dq warp-specialised",
                       ", dk/dv warp-specialised",
                       ", dq and dk/dv warp-specialised"};
  return t.fwdKernel == 3 ? std::string("forward warp-specialised") +
                                (t.bwdKernel >= 3 && t.bwdKernel <= 5 ? bwd[t.bwdKernel] : "")
         : t.fwdKernel == 2 ? "forward wgmma"
                            : "forward " + std::to_string(16 * t.fwdRows) + " rows a warp";
}

} // namespace

int main(int argc, char **argv) {
  bench::programName() = "zrt-attention-bench";
  int reps = 20;
  std::string only, tilings; // tilings: indices into kTilings, all if empty
  bool checks = true;        // --no-checks (for a profiler): the timed shapes only
  bool matrix = false;
  AttentionTiling matrixTiling; // --fwd-kernel / --bwd-kernel (AttentionTiling's numbers)
  int dkvParts = 0;             // --dkv-parts, for every tiling
  std::vector<int64_t> dims = {32, 48, 64, 80, 96, 112, 128, 160, 192, 256},
                       seqs = {512, 1024, 4096, 16384};
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
    else if (a == "--matrix")
      matrix = true;
    else if (a == "--dims" && i + 1 < argc)
      dims = parseList(argv[++i]);
    else if (a == "--seqs" && i + 1 < argc)
      seqs = parseList(argv[++i]);
    else if (a == "--fwd-kernel" && i + 1 < argc)
      matrixTiling.fwdKernel = std::atoi(argv[++i]);
    else if (a == "--bwd-kernel" && i + 1 < argc)
      matrixTiling.bwdKernel = std::atoi(argv[++i]);
    else if (a == "--dkv-parts" && i + 1 < argc)
      matrixTiling.dkvParts = dkvParts = std::max(0, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: zrt-attention-bench [--reps N] [--shapes a,b,...] "
                           "[--tilings i,j,...] [--no-checks]\n"
                           "       zrt-attention-bench --matrix [--dims d,...] [--seqs s,...] "
                           "[--reps N] [--fwd-kernel K] [--bwd-kernel K]\n"
                           "       either with [--dkv-parts N]\n");
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
  for (AttentionTiling &t : chosen)
    t.dkvParts = dkvParts;
  Gpu gpu;
  if (matrix)
    return runMatrix(gpu, dims, seqs, reps, matrixTiling) ? 0 : 1;
  bool ok = true;
  // Every tiling against the CPU reference: odd lengths (edge tiles),
  // grouped k/v heads, causal and random masks, every kernel width; dq, dk and
  // dv hold NaN before each backward, so a row it does not write fails.
  struct Small {
    int64_t b, s, h, hk, d;
    Problem::Mask mask;
    float softcap = 0;
  } smalls[] = {{2, 200, 4, 2, 64, Problem::kCausal},
                {1, 130, 4, 4, 64, Problem::kRandom},
                {1, 200, 4, 2, 128, Problem::kCausal},
                {1, 77, 2, 1, 128, Problem::kRandom},
                {2, 200, 4, 2, 64, Problem::kRandomEmptyTile},
                {1, 130, 4, 1, 128, Problem::kRandomEmptyTile},
                // Every kernel width, and heads padded to one (72 -> 80,
                // 136 -> 160, 200 -> 224, 248 -> 256: zero columns in
                // shared memory, none written).
                {1, 150, 4, 1, 32, Problem::kCausal},
                {1, 150, 4, 2, 48, Problem::kRandom},
                {1, 150, 4, 4, 80, Problem::kCausal},
                {2, 130, 4, 1, 96, Problem::kRandomEmptyTile},
                {1, 150, 4, 2, 96, Problem::kCausal},
                {1, 150, 4, 2, 112, Problem::kRandom},
                {1, 150, 4, 4, 160, Problem::kCausal},
                {1, 150, 4, 1, 192, Problem::kRandom},
                {1, 150, 4, 2, 224, Problem::kCausal},
                {2, 130, 4, 1, 256, Problem::kCausal},
                {1, 150, 4, 4, 256, Problem::kRandomEmptyTile},
                {1, 100, 2, 1, 72, Problem::kCausal},
                {1, 100, 2, 2, 136, Problem::kRandom},
                {1, 100, 2, 1, 200, Problem::kCausal},
                {1, 100, 2, 1, 248, Problem::kRandom},
                // Structural masks (no bias tensor): causal, a 70-key
                // window (tiles the window ends inside), none.
                {2, 200, 4, 2, 64, Problem::kCausalAttr},
                {1, 200, 4, 1, 128, Problem::kWindowAttr},
                {1, 150, 4, 2, 96, Problem::kWindowAttr},
                {1, 130, 4, 4, 256, Problem::kCausalAttr},
                {1, 150, 4, 2, 80, Problem::kNoneAttr},
                {1, 100, 2, 1, 40, Problem::kWindowAttr},
                // Above D = 128 (the split dk/dv kernel): each mask, a padded
                // width, eight query heads a k/v head.
                {1, 150, 4, 2, 160, Problem::kWindowAttr},
                {1, 130, 4, 1, 192, Problem::kNoneAttr},
                {1, 300, 8, 1, 256, Problem::kNoneAttr},
                {1, 100, 2, 1, 200, Problem::kDocumentsAttr},
                {2, 150, 4, 2, 224, Problem::kCausalAttr, 1.5f},
                // Logit soft-capping (caps near the scores' size, so that
                // tanh bends them) on each structural mask.
                {2, 200, 4, 2, 64, Problem::kCausalAttr, 1.0f},
                {1, 150, 4, 1, 128, Problem::kWindowAttr, 2.0f},
                {1, 130, 4, 2, 96, Problem::kNoneAttr, 1.5f},
                {1, 150, 4, 1, 256, Problem::kCausalAttr, 1.0f},
                {1, 100, 2, 2, 32, Problem::kCausalAttr, 0.5f},
                // Packed documents (per-document attention): documents of
                // 1 to S / 2 tokens, some ending on a tile's edge, other
                // ones in each batch row; skipped and partial tiles.
                {2, 300, 4, 2, 64, Problem::kDocumentsAttr},
                {2, 700, 4, 1, 128, Problem::kDocumentsAttr},
                {1, 500, 4, 2, 96, Problem::kDocumentsAttr},
                {2, 400, 2, 1, 256, Problem::kDocumentsAttr},
                {1, 300, 4, 4, 32, Problem::kDocumentsAttr},
                {1, 200, 2, 2, 16, Problem::kDocumentsAttr},
                {2, 300, 4, 2, 64, Problem::kDocumentsAttr, 1.0f}};
  const char *maskName[] = {"causal",
                            "random mask",
                            "random mask, a tile seeing no key",
                            "no mask",
                            "causal (structural)",
                            "window 70 (structural)",
                            "none (structural)",
                            "packed documents"};
  for (const Small &c : smalls) {
    if (!checks)
      break;
    Problem p(c.b, c.s, c.h, c.hk, c.d, c.mask, 7);
    p.softcap = c.softcap;
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
      std::printf("check B%lld S%lld H%lld/%lld D%lld %s%s, %s: out %.1e dq %.1e dk %.1e "
                  "dv %.1e vs CPU %s\n",
                  (long long)c.b, (long long)c.s, (long long)c.h, (long long)c.hk, (long long)c.d,
                  maskName[c.mask], c.softcap > 0 ? ", soft-capped" : "", name(t).c_str(), e[0],
                  e[1], e[2], e[3], pass ? "ok" : "FAILED");
    }
  }
  for (const Shape &s : kShapes) {
    if (!only.empty() &&
        ("," + only + ",").find("," + std::string(s.name) + ",") == std::string::npos)
      continue;
    Problem p(s.b, s.s, s.h, s.hk, s.d, Problem::kCausalAttr, 11);
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
        same &= t.fwdKernel >= 2 || t.bwdKernel >= 2 ? relError(got[i], first[i]) <= 1e-2
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
    // Packed documents (zcc --per-document) on the same shape, the last
    // tiling (the default on this GPU): the time and the share of the causal
    // scores the documents keep.
    Problem docs(s.b, s.s, s.h, s.hk, s.d, Problem::kDocumentsAttr, 11);
    double kept = 0;
    for (int64_t r = 0; r < s.b; ++r)
      for (int64_t i = 0; i < s.s; ++i)
        kept += (double)docs.positions[r * s.s + i] + 1;
    double fwd = gpu.time(docs, chosen[0], false, reps),
           bwd = gpu.time(docs, chosen[0], true, reps);
    std::printf("%-10s B%lld S%lld H%lld/%lld D%lld packed documents (%.1f%% of the causal "
                "scores), %s: forward %.3f ms, backward %.3f ms\n",
                s.name, (long long)s.b, (long long)s.s, (long long)s.h, (long long)s.hk,
                (long long)s.d, 100.0 * kept / (s.b * s.s * (s.s + 1) / 2.0),
                name(chosen.back()).c_str(), fwd, bwd);
    docs.release(true);
    p.release(true);
  }
  std::printf("zrt-attention-bench: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
