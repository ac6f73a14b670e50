//===- zrt-moe-bench.cpp - the mixture of experts' kernels, checked and timed -===//
//
// First checks the CUDA moe_route, grouped_matmul and grouped_matmul_rhs_grad
// against the CPU kernels (runtime/cpu/Moe.cpp) on the same inputs: the
// routing entry for entry (dropless and with a capacity), the GEMMs in
// float32 (the SIMT kernels) and bfloat16 (wgmma on Hopper) at shapes with
// uneven, empty and one-row experts, widths that end inside a tile, and
// both layouts of the expert matrices; then each bfloat16 GEMM again, the
// same bits (deterministic). Then times the bfloat16 GEMMs of a layer at
// model shapes (tokens x top-k routed rows, skewed routing) against one
// dense cuBLASLt GEMM of the same FLOPs, and prints TFLOP/s.
// Exits non-zero if a check fails. tools/gpu-pack.sh carries it;
// docs/benchmarks.md has its figures.
//
//   zrt-moe-bench [--reps N] [--shapes fine,fine-1408,mixtral,fine-128] [--no-checks]
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
#include <random>
#include <string>
#include <vector>

using namespace zrt;

namespace {

using bench::check;
using bench::fromBf16;
using bench::toBf16;

/// A tensor on the host and the device (bytes).
struct Tensor {
  DType type = DType::F32;
  std::vector<int64_t> shape;
  std::vector<char> host;
  void *dev = nullptr;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  size_t bytes() const { return (size_t)numel() * dtypeSize(type); }
  Tensor(DType t, std::vector<int64_t> s) : type(t), shape(std::move(s)) {
    host.assign(std::max<size_t>(bytes(), 1), 0);
    CHECK_CUDA(cudaMalloc(&dev, std::max<size_t>(bytes(), 16)));
    CHECK_CUDA(cudaMemset(dev, 0, std::max<size_t>(bytes(), 16)));
  }
  Tensor(const Tensor &) = delete;
  ~Tensor() { cudaFree(dev); }
  void upload() { CHECK_CUDA(cudaMemcpy(dev, host.data(), bytes(), cudaMemcpyHostToDevice)); }
  std::vector<char> download() const {
    std::vector<char> h(bytes());
    CHECK_CUDA(cudaMemcpy(h.data(), dev, bytes(), cudaMemcpyDeviceToHost));
    return h;
  }
  TensorRef hostRef() { return TensorRef{type, shape, host.data()}; }
  TensorRef devRef() const { return TensorRef{type, shape, static_cast<char *>(dev)}; }
  float at(const std::vector<char> &h, int64_t i) const {
    if (type == DType::F32) {
      float f;
      std::memcpy(&f, h.data() + 4 * i, 4);
      return f;
    }
    uint16_t b;
    std::memcpy(&b, h.data() + 2 * i, 2);
    return fromBf16(b);
  }
  void fill(std::mt19937_64 &rng, float scale) {
    std::uniform_real_distribution<float> u(-scale, scale);
    for (int64_t i = 0; i < numel(); ++i) {
      float v = u(rng);
      if (type == DType::F32)
        std::memcpy(host.data() + 4 * i, &v, 4);
      else {
        uint16_t b = toBf16(v);
        std::memcpy(host.data() + 2 * i, &b, 2);
      }
    }
    upload();
  }
};

struct Gpu {
  CudaContext ctx;
  cudaEvent_t start, stop;
  Gpu() {
    CHECK_CUDA(cudaStreamCreate(&ctx.stream));
    CHECK_CUDA(cudaMalloc(&ctx.errorInfo, 5 * sizeof(long long)));
    CHECK_CUDA(cudaMemset(ctx.errorInfo, 0, 5 * sizeof(long long)));
    if (cublasLtCreate(&ctx.lt) != CUBLAS_STATUS_SUCCESS)
      bench::fail("cublasLtCreate", "failed");
    ctx.workspaceBytes = 32u << 20;
    CHECK_CUDA(cudaMalloc(&ctx.workspace, ctx.workspaceBytes));
    CHECK_CUDA(cudaEventCreate(&start));
    CHECK_CUDA(cudaEventCreate(&stop));
  }
  void run(KernelId id, const KernelCall &c, const char *what) {
    check(launchCudaKernel(id, c, ctx), what);
  }
  std::string kernelError() {
    long long info[5];
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    CHECK_CUDA(cudaMemcpy(info, ctx.errorInfo, sizeof info, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemset(ctx.errorInfo, 0, sizeof info));
    return describeCudaError(info);
  }
  template <typename F> double time(F f, int reps) {
    for (int i = 0; i < 3; ++i)
      f();
    std::vector<float> ms;
    for (int i = 0; i < reps; ++i) {
      CHECK_CUDA(cudaEventRecord(start, ctx.stream));
      f();
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

int failures = 0;
void report(bool ok, const std::string &line) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", line.c_str());
  std::fflush(stdout);
  failures += !ok;
}

/// Each token's k distinct experts, drawn with weights that skew the load
/// (expert e's weight 1 / (1 + e % 7)), with |empty| experts never chosen.
void route(Tensor &ex, int64_t experts, int64_t empty, std::mt19937_64 &rng) {
  int64_t n = ex.shape[0], k = ex.shape[1];
  std::vector<double> w(experts);
  for (int64_t e = 0; e < experts; ++e)
    w[e] = e < empty ? 0.0 : 1.0 / (1 + e % 7);
  for (int64_t t = 0; t < n; ++t) {
    std::vector<double> left = w;
    for (int64_t s = 0; s < k; ++s) {
      std::discrete_distribution<int64_t> d(left.begin(), left.end());
      int64_t e = d(rng);
      left[e] = 0;
      reinterpret_cast<int64_t *>(ex.host.data())[t * k + s] = e;
    }
  }
  ex.upload();
}

/// moe_route on both backends; leaves the offsets on both.
void checkRoute(Gpu &g, int64_t n, int64_t k, int64_t experts, int64_t capacity,
                std::mt19937_64 &rng) {
  Tensor ex(DType::I64, {n, k});
  route(ex, experts, 1, rng);
  int64_t rows = capacity > 0 ? experts * capacity : n * k;
  Tensor tokens(DType::I64, {rows}), pos(DType::I64, {n, k}), off(DType::I64, {experts + 1});
  KernelCall h{
      {ex.hostRef()}, {tokens.hostRef(), pos.hostRef(), off.hostRef()}, {experts, capacity}};
  KernelCall d{{ex.devRef()}, {tokens.devRef(), pos.devRef(), off.devRef()}, {experts, capacity}};
  check(cpuKernel(KernelId::MoeRoute).run(h), "cpu moe_route");
  g.run(KernelId::MoeRoute, d, "moe_route");
  std::string err = g.kernelError();
  bool same = err.empty() && tokens.download() == tokens.host && pos.download() == pos.host &&
              off.download() == off.host;
  char line[200];
  std::snprintf(line, sizeof line,
                "moe_route %lld tokens top-%lld of %lld experts, capacity %lld: %s", (long long)n,
                (long long)k, (long long)experts, (long long)capacity,
                same ? "the CPU's rows, positions and offsets" : ("differs " + err).c_str());
  report(same, line);
  // An expert id out of range: the error slot names the token.
  reinterpret_cast<int64_t *>(ex.host.data())[5 * k + 1] = experts + 3;
  ex.upload();
  g.run(KernelId::MoeRoute, d, "moe_route");
  err = g.kernelError();
  report(err.find("token 5 chose expert") != std::string::npos,
         "moe_route with an expert id out of range: " + err);
}

/// moe_route for one rank of an expert-parallel group (its |local| experts
/// from |first| of |all|), on both backends.
void checkRouteLocal(Gpu &g, int64_t n, int64_t k, int64_t all, int64_t local, int64_t first,
                     std::mt19937_64 &rng) {
  Tensor ex(DType::I64, {n, k}), start(DType::I64, {1});
  route(ex, all, 0, rng);
  *reinterpret_cast<int64_t *>(start.host.data()) = first;
  start.upload();
  int64_t rows = n * std::min(k, local);
  Tensor tokens(DType::I64, {rows}), pos(DType::I64, {n, k}), off(DType::I64, {local + 1});
  KernelCall h{{ex.hostRef(), start.hostRef()},
               {tokens.hostRef(), pos.hostRef(), off.hostRef()},
               {local, 0, all}};
  KernelCall d{{ex.devRef(), start.devRef()},
               {tokens.devRef(), pos.devRef(), off.devRef()},
               {local, 0, all}};
  check(cpuKernel(KernelId::MoeRoute).run(h), "cpu moe_route (a rank's experts)");
  g.run(KernelId::MoeRoute, d, "moe_route (a rank's experts)");
  std::string err = g.kernelError();
  bool same = err.empty() && tokens.download() == tokens.host && pos.download() == pos.host &&
              off.download() == off.host;
  char line[220];
  std::snprintf(line, sizeof line,
                "moe_route %lld tokens top-%lld, experts %lld-%lld of %lld (expert parallelism): "
                "%s",
                (long long)n, (long long)k, (long long)first, (long long)(first + local - 1),
                (long long)all,
                same ? "the CPU's rows, positions and offsets" : ("differs " + err).c_str());
  report(same, line);
}

/// Offsets of |rows| routed rows over |experts|: skewed, with empty experts
/// (the first |empty|), one-row experts and a last expert that takes the rest.
std::vector<int64_t> offsetsFor(int64_t rows, int64_t experts, int64_t empty,
                                std::mt19937_64 &rng) {
  std::vector<int64_t> off(experts + 1, 0);
  std::vector<double> w(experts);
  double sum = 0;
  for (int64_t e = 0; e < experts; ++e)
    sum += w[e] =
        e < empty ? 0.0 : (e % 5 == 1 ? 1e-9 : 1.0 / (1 + e % 7) * (0.5 + rng() % 100 / 100.0));
  int64_t at = 0;
  for (int64_t e = 0; e < experts; ++e) {
    int64_t c =
        e + 1 == experts ? rows - at : std::min<int64_t>(rows - at, (int64_t)(rows * w[e] / sum));
    if (e % 5 == 1 && at < rows && e + 1 < experts)
      c = 1; // a one-row expert
    off[e + 1] = at += c;
  }
  return off;
}

double relError(const Tensor &t, const std::vector<char> &got, const std::vector<char> &want) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    double a = t.at(got, i), b = t.at(want, i);
    num += (a - b) * (a - b);
    den += b * b;
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

/// grouped_matmul (both layouts) and its matrix gradient (both) against the CPU.
/// |unused| > 0: the offsets end that many rows before m (an expert-parallel
/// rank's route), and grouped_matmul must zero those rows.
void checkGemms(Gpu &g, DType type, int64_t m, int64_t k, int64_t n, int64_t experts, int64_t empty,
                std::mt19937_64 &rng, int64_t unused = 0) {
  double tol = type == DType::F32 ? 1e-5 : 1e-2;
  Tensor off(DType::I64, {experts + 1});
  std::vector<int64_t> o = offsetsFor(m - unused, experts, empty, rng);
  std::memcpy(off.host.data(), o.data(), o.size() * 8);
  off.upload();
  const char *tn = type == DType::F32 ? "f32" : "bf16";
  for (int t = 0; t < 2; ++t) {
    Tensor x(type, {m, k}),
        w(type, t ? std::vector<int64_t>{experts, n, k} : std::vector<int64_t>{experts, k, n}),
        y(type, {m, n});
    x.fill(rng, 1.0f);
    w.fill(rng, 0.1f);
    std::vector<int64_t> ints{t};
    if (unused)
      ints.push_back(1); // rows past the offsets may exist
    KernelCall h{{x.hostRef(), w.hostRef(), off.hostRef()}, {y.hostRef()}, ints};
    KernelCall d{{x.devRef(), w.devRef(), off.devRef()}, {y.devRef()}, ints};
    check(cpuKernel(KernelId::GroupedMatmul).run(h), "cpu grouped_matmul");
    CHECK_CUDA(cudaMemset(y.dev, 0x7f, y.bytes())); // the unused rows too must be written
    g.run(KernelId::GroupedMatmul, d, "grouped_matmul");
    std::vector<char> got = y.download();
    double err = relError(y, got, y.host);
    g.run(KernelId::GroupedMatmul, d, "grouped_matmul");
    bool same = y.download() == got;
    char line[240];
    std::snprintf(line, sizeof line,
                  "grouped_matmul %s %lld x %lld x %lld, %lld experts (%lld empty%s), %s: rel err "
                  "%.2e%s",
                  tn, (long long)m, (long long)k, (long long)n, (long long)experts,
                  (long long)empty, unused ? ", unused rows zeroed" : "",
                  t ? "[E, N, K]" : "[E, K, N]", err,
                  same ? ", same bits again" : ", NOT the same bits again");
    report(err < tol && same, line);

    // The matrix gradient: dW = x^T dy (or dy^T x) over each expert's rows.
    Tensor dy(type, {m, n}),
        dw(type, t ? std::vector<int64_t>{experts, n, k} : std::vector<int64_t>{experts, k, n});
    dy.fill(rng, 1.0f);
    CHECK_CUDA(cudaMemset(dw.dev, 0x7f, dw.bytes())); // rows the kernel must write
    KernelCall hg{{x.hostRef(), dy.hostRef(), off.hostRef()}, {dw.hostRef()}, {t}};
    KernelCall dg{{x.devRef(), dy.devRef(), off.devRef()}, {dw.devRef()}, {t}};
    check(cpuKernel(KernelId::GroupedMatmulRhsGrad).run(hg), "cpu grouped_matmul_rhs_grad");
    g.run(KernelId::GroupedMatmulRhsGrad, dg, "grouped_matmul_rhs_grad");
    got = dw.download();
    err = relError(dw, got, dw.host);
    g.run(KernelId::GroupedMatmulRhsGrad, dg, "grouped_matmul_rhs_grad");
    same = dw.download() == got;
    std::snprintf(line, sizeof line,
                  "grouped_matmul_rhs_grad %s %lld x %lld x %lld, %lld experts, %s: rel err "
                  "%.2e%s",
                  tn, (long long)m, (long long)k, (long long)n, (long long)experts,
                  t ? "[E, N, K]" : "[E, K, N]", err,
                  same ? ", same bits again" : ", NOT the same bits again");
    report(err < tol && same, line);
  }
}

struct ModelShape {
  const char *name;
  int64_t tokens, topk, experts, hidden, inter;
};
const ModelShape kShapes[] = {
    // 64 experts top-8 of 512 at 2048 wide, 4 x 1024 tokens: the fine-grained model of
    // bench/torch_moe_baseline.py --size fine (DeepSeek-style experts).
    {"fine", 4096, 8, 64, 2048, 512},
    // The same with Qwen1.5-MoE's expert width, 1408.
    {"fine-1408", 4096, 8, 64, 2048, 1408},
    // Mixtral's proportions at 1024 wide: 8 experts top-2 of 3584.
    {"mixtral", 4096, 2, 8, 1024, 3584},
    // 128 experts top-8 of 768 (Qwen3-MoE-style), 2048 wide.
    {"fine-128", 4096, 8, 128, 2048, 768},
};

/// A layer's expert GEMMs at |s| (bf16): gate/up [E, 2I, H] and down
/// [E, H, I] in nn.Linear's layout, forward, dx and dW; each against one
/// dense GEMM of the same m x k x n.
void timeShape(Gpu &g, const ModelShape &s, int reps, std::mt19937_64 &rng) {
  const DType bf = DType::BF16;
  int64_t m = s.tokens * s.topk, H = s.hidden, I2 = 2 * s.inter;
  Tensor off(DType::I64, {s.experts + 1});
  std::vector<int64_t> o = offsetsFor(m, s.experts, 0, rng);
  std::memcpy(off.host.data(), o.data(), o.size() * 8);
  off.upload();
  Tensor x(bf, {m, H}), wgu(bf, {s.experts, I2, H}), h(bf, {m, I2}),
      wd(bf, {s.experts, H, s.inter}), hd(bf, {m, s.inter}), y(bf, {m, H}),
      dgu(bf, {s.experts, I2, H});
  x.fill(rng, 1.0f);
  wgu.fill(rng, 0.02f);
  wd.fill(rng, 0.02f);
  hd.fill(rng, 1.0f);
  // Dense stand-ins: one matrix of the same shape (what a dense model of
  // the active parameters runs).
  Tensor dw1(bf, {I2, H}), dw2(bf, {H, s.inter});
  struct Case {
    const char *what;
    KernelId id;
    KernelCall grouped, dense;
    double flops;
  };
  std::vector<Case> cases = {
      {"gate_up x W^T", KernelId::GroupedMatmul,
       KernelCall{{x.devRef(), wgu.devRef(), off.devRef()}, {h.devRef()}, {1}},
       KernelCall{{x.devRef(), dw1.devRef()}, {h.devRef()}, {0, 1}}, 2.0 * m * H * I2},
      {"down x W^T", KernelId::GroupedMatmul,
       KernelCall{{hd.devRef(), wd.devRef(), off.devRef()}, {y.devRef()}, {1}},
       KernelCall{{hd.devRef(), dw2.devRef()}, {y.devRef()}, {0, 1}}, 2.0 * m * s.inter * H},
      {"gate_up dx = dy W", KernelId::GroupedMatmul,
       KernelCall{{h.devRef(), wgu.devRef(), off.devRef()}, {x.devRef()}, {0}},
       KernelCall{{h.devRef(), dw1.devRef()}, {x.devRef()}, {0, 0}}, 2.0 * m * H * I2},
      {"gate_up dW = dy^T x", KernelId::GroupedMatmulRhsGrad,
       KernelCall{{x.devRef(), h.devRef(), off.devRef()}, {dgu.devRef()}, {1}},
       KernelCall{{h.devRef(), x.devRef()}, {dw1.devRef()}, {1, 0}}, 2.0 * m * H * I2},
  };
  std::printf("\n%s: %lld tokens x top-%lld of %lld experts, hidden %lld, expert FFN %lld "
              "(%lld routed rows)\n",
              s.name, (long long)s.tokens, (long long)s.topk, (long long)s.experts, (long long)H,
              (long long)s.inter, (long long)m);
  std::printf("  %-22s %10s %9s %10s %9s %7s\n", "GEMM", "grouped ms", "TFLOP/s", "dense ms",
              "TFLOP/s", "ratio");
  for (Case &c : cases) {
    double gm = g.time([&] { g.run(c.id, c.grouped, c.what); }, reps);
    double dm = g.time([&] { g.run(KernelId::Matmul, c.dense, "matmul"); }, reps);
    std::printf("  %-22s %10.3f %9.1f %10.3f %9.1f %7.2f\n", c.what, gm, c.flops / gm / 1e9, dm,
                c.flops / dm / 1e9, dm / gm);
  }
  std::fflush(stdout);
}

} // namespace

int main(int argc, char **argv) {
  bench::programName() = "zrt-moe-bench";
  int reps = 20;
  bool checks = true;
  std::string shapes = "fine,fine-1408,mixtral,fine-128";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc)
      reps = std::atoi(argv[++i]);
    else if (a == "--shapes" && i + 1 < argc)
      shapes = argv[++i];
    else if (a == "--no-checks")
      checks = false;
    else {
      std::fprintf(stderr,
                   "usage: zrt-moe-bench [--reps N] [--shapes fine,fine-1408,mixtral,fine-128] "
                   "[--no-checks]\n");
      return 2;
    }
  }
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("zrt-moe-bench on %s (compute capability %d.%d)\n", prop.name, prop.major,
              prop.minor);
  Gpu g;
  std::mt19937_64 rng(7);
  if (checks) {
    checkRoute(g, 4096, 8, 64, 0, rng);
    checkRoute(g, 4096, 8, 64, 640, rng);
    checkRoute(g, 300, 2, 8, 0, rng);
    checkRoute(g, 300, 2, 8, 50, rng);
    for (DType t : {DType::F32, DType::BF16}) {
      checkGemms(g, t, 600, 136, 200, 8, 1, rng);   // widths inside a tile
      checkGemms(g, t, 1000, 64, 72, 16, 3, rng);   // one slice of k
      checkGemms(g, t, 2048, 512, 384, 32, 2, rng); // several slices and tiles
    }
    checkGemms(g, DType::BF16, 8192, 1024, 704, 64, 0, rng);
    // Expert parallelism: a rank's 8 of 64 experts over 4 ranks' tokens, and
    // its GEMMs over fewer rows than the plan holds.
    checkRouteLocal(g, 4 * 1024, 8, 64, 8, 16, rng);
    checkRouteLocal(g, 2 * 300, 2, 8, 4, 4, rng);
    for (DType t : {DType::F32, DType::BF16})
      checkGemms(g, t, 2048, 512, 384, 8, 1, rng, /*unused=*/700);
  }
  for (const ModelShape &s : kShapes)
    if (("," + shapes + ",").find("," + std::string(s.name) + ",") != std::string::npos)
      timeShape(g, s, reps, rng);
  std::printf("\nzrt-moe-bench: %d failure(s)\n", failures);
  return failures ? 1 : 0;
}
