//===- Conv.cpp - CPU kernels: convolutions, channels first ----------------===//
//
// conv, conv_input_grad and conv_filter_grad over 1 to 3 spatial axes, by
// im2col: per sample and group, the input's receptive fields as a column
// matrix [C/G x K.., O..] and one OpenBLAS GEMM with the filters [M/G,
// C/G x K..] (the input gradient: the filters' transpose times the output
// gradient, added back into the input by col2im; the filter gradient: the
// output gradient times the columns' transpose, summed over samples).
// bf16/fp16 run in float32 (viaFloat32), as matmul does. ABI, for every one:
//
//   ints [groups, strides (S), dilations (S), pads before (S), pads after (S)]
//   conv             (x [N, C, In..], w [M, C/G, K..]) -> y [N, M, Out..]
//   conv_input_grad  (dy [N, M, Out..], w)            -> dx [N, C, In..]
//   conv_filter_grad (x, dy)                          -> dw [M, C/G, K..]
//
// Out = (In + before + after - dilation (K - 1) - 1) / stride + 1, which
// must hold exactly (dialects/zero/ZeroConvOps.td).
//
//===----------------------------------------------------------------------===//
#include "cpu/KernelSupport.h"

#include <cblas.h>

#include <algorithm>

namespace zrt::cpu {
namespace {

/// A convolution's geometry, spatial axes padded to 3 (size 1, stride 1).
struct ConvShape {
  int64_t n = 0, c = 0, m = 0, groups = 1, spatial = 0;
  int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, dil[3] = {1, 1, 1}, pad[3] = {0, 0, 0};
  int64_t inVol() const { return in[0] * in[1] * in[2]; }
  int64_t kVol() const { return k[0] * k[1] * k[2]; }
  int64_t outVol() const { return out[0] * out[1] * out[2]; }
  int64_t cg() const { return c / groups; }
  int64_t mg() const { return m / groups; }
};

/// The geometry of x, w, y (any of them may be the result) with the call's
/// ints, or what is wrong.
std::string shapeOf(const KernelCall &c, const TensorRef &x, const TensorRef &w, const TensorRef &y,
                    ConvShape &s) {
  size_t rank = x.shape.size();
  if (rank < 3 || rank > 5 || w.shape.size() != rank || y.shape.size() != rank)
    return "expects input, filter and output [N, C, 1-3 spatial axes], got " + describe(x) + ", " +
           describe(w) + ", " + describe(y);
  if (!isFloatStorage(x.dtype) || w.dtype != x.dtype || y.dtype != x.dtype)
    return "expects float operands of one type";
  s.spatial = (int64_t)rank - 2;
  if (auto e = checkInts(c, 1 + 4 * s.spatial); !e.empty())
    return e;
  s.n = x.shape[0], s.c = x.shape[1], s.m = w.shape[0], s.groups = c.ints[0];
  if (s.groups < 1 || s.c % s.groups || s.m % s.groups || w.shape[1] * s.groups != s.c)
    return "groups " + std::to_string(s.groups) + " do not split " + describe(x) + " and " +
           describe(w);
  if (y.shape[0] != s.n || y.shape[1] != s.m)
    return "output " + describe(y) + " should have " + std::to_string(s.n) + " samples of " +
           std::to_string(s.m) + " channels";
  for (int64_t d = 0; d < s.spatial; ++d) {
    int64_t stride = c.ints[1 + d], dil = c.ints[1 + s.spatial + d],
            before = c.ints[1 + 2 * s.spatial + d], after = c.ints[1 + 3 * s.spatial + d];
    if (stride < 1 || dil < 1 || before < 0 || after < 0)
      return "strides and dilations must be >= 1 and pads >= 0";
    s.in[d] = x.shape[2 + d], s.k[d] = w.shape[2 + d], s.out[d] = y.shape[2 + d];
    s.stride[d] = stride, s.dil[d] = dil, s.pad[d] = before;
    int64_t span = dil * (s.k[d] - 1) + 1, padded = s.in[d] + before + after;
    if (padded < span || (padded - span) / stride + 1 != s.out[d])
      return "output " + describe(y) + " does not match input " + describe(x) + " and filter " +
             describe(w) + " on spatial axis " + std::to_string(d);
  }
  return "";
}

/// Visits every (row, column) of the column matrix [C/G K.., Out..] of
/// sample |n|, group |g| whose input position lies inside x: f(row, column,
/// input offset of that element in x).
template <typename F> void forEachTap(const ConvShape &s, int64_t n, int64_t g, F f) {
  const int64_t kv = s.kVol(), ov = s.outVol(), iv = s.inVol();
  for (int64_t cc = 0; cc < s.cg(); ++cc) {
    const int64_t base = (n * s.c + g * s.cg() + cc) * iv;
    for (int64_t k0 = 0; k0 < s.k[0]; ++k0)
      for (int64_t k1 = 0; k1 < s.k[1]; ++k1)
        for (int64_t k2 = 0; k2 < s.k[2]; ++k2) {
          const int64_t row = cc * kv + (k0 * s.k[1] + k1) * s.k[2] + k2;
          for (int64_t o0 = 0; o0 < s.out[0]; ++o0) {
            int64_t i0 = o0 * s.stride[0] + k0 * s.dil[0] - s.pad[0];
            if (i0 < 0 || i0 >= s.in[0])
              continue;
            for (int64_t o1 = 0; o1 < s.out[1]; ++o1) {
              int64_t i1 = o1 * s.stride[1] + k1 * s.dil[1] - s.pad[1];
              if (i1 < 0 || i1 >= s.in[1])
                continue;
              for (int64_t o2 = 0; o2 < s.out[2]; ++o2) {
                int64_t i2 = o2 * s.stride[2] + k2 * s.dil[2] - s.pad[2];
                if (i2 < 0 || i2 >= s.in[2])
                  continue;
                f(row * ov + (o0 * s.out[1] + o1) * s.out[2] + o2,
                  base + (i0 * s.in[1] + i1) * s.in[2] + i2);
              }
            }
          }
        }
  }
}

void im2col(const ConvShape &s, const float *x, int64_t n, int64_t g, std::vector<float> &cols) {
  cols.assign(s.cg() * s.kVol() * s.outVol(), 0.0f);
  forEachTap(s, n, g, [&](int64_t at, int64_t from) { cols[at] = x[from]; });
}

Status runConvF32(const KernelCall &c) {
  ConvShape s;
  if (auto e = shapeOf(c, c.in[0], c.in[1], c.out[0], s); !e.empty())
    return errorf("conv: ", e);
  const float *x = c.in[0].as<float>(), *w = c.in[1].as<float>();
  float *y = c.out[0].as<float>();
  const int64_t rows = s.cg() * s.kVol(), ov = s.outVol();
  std::vector<float> cols;
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t g = 0; g < s.groups; ++g) {
      im2col(s, x, n, g, cols);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)s.mg(), (int)ov, (int)rows, 1.0f,
                  w + g * s.mg() * rows, (int)rows, cols.data(), (int)ov, 0.0f,
                  y + (n * s.m + g * s.mg()) * ov, (int)ov);
    }
  return Status::ok();
}

Status runConvInputGradF32(const KernelCall &c) {
  ConvShape s;
  if (auto e = shapeOf(c, c.out[0], c.in[1], c.in[0], s); !e.empty())
    return errorf("conv_input_grad: ", e);
  const float *dy = c.in[0].as<float>(), *w = c.in[1].as<float>();
  float *dx = c.out[0].as<float>();
  std::fill(dx, dx + s.n * s.c * s.inVol(), 0.0f);
  const int64_t rows = s.cg() * s.kVol(), ov = s.outVol();
  std::vector<float> cols(rows * ov);
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t g = 0; g < s.groups; ++g) {
      // cols = w_g^T dy_g: [C/G K.., Out..]; each adds back where it read.
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)rows, (int)ov, (int)s.mg(), 1.0f,
                  w + g * s.mg() * rows, (int)rows, dy + (n * s.m + g * s.mg()) * ov, (int)ov, 0.0f,
                  cols.data(), (int)ov);
      forEachTap(s, n, g, [&](int64_t at, int64_t to) { dx[to] += cols[at]; });
    }
  return Status::ok();
}

Status runConvFilterGradF32(const KernelCall &c) {
  ConvShape s;
  if (auto e = shapeOf(c, c.in[0], c.out[0], c.in[1], s); !e.empty())
    return errorf("conv_filter_grad: ", e);
  const float *x = c.in[0].as<float>(), *dy = c.in[1].as<float>();
  float *dw = c.out[0].as<float>();
  const int64_t rows = s.cg() * s.kVol(), ov = s.outVol();
  std::fill(dw, dw + s.m * rows, 0.0f);
  std::vector<float> cols;
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t g = 0; g < s.groups; ++g) {
      im2col(s, x, n, g, cols);
      // dw_g += dy_g cols^T: [M/G, Out..] x [Out.., C/G K..]
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)s.mg(), (int)rows, (int)ov, 1.0f,
                  dy + (n * s.m + g * s.mg()) * ov, (int)ov, cols.data(), (int)ov, 1.0f,
                  dw + g * s.mg() * rows, (int)rows);
    }
  return Status::ok();
}

} // namespace

std::string checkConv(const KernelCall &c) {
  ConvShape s;
  if (auto e = arity(c, 2, 1); !e.empty())
    return e;
  return shapeOf(c, c.in[0], c.in[1], c.out[0], s);
}
Status runConv(const KernelCall &c) { return viaFloat32(c, runConvF32); }

std::string checkConvInputGrad(const KernelCall &c) {
  ConvShape s;
  if (auto e = arity(c, 2, 1); !e.empty())
    return e;
  return shapeOf(c, c.out[0], c.in[1], c.in[0], s);
}
Status runConvInputGrad(const KernelCall &c) { return viaFloat32(c, runConvInputGradF32); }

std::string checkConvFilterGrad(const KernelCall &c) {
  ConvShape s;
  if (auto e = arity(c, 2, 1); !e.empty())
    return e;
  return shapeOf(c, c.in[0], c.out[0], c.in[1], s);
}
Status runConvFilterGrad(const KernelCall &c) { return viaFloat32(c, runConvFilterGradF32); }

} // namespace zrt::cpu
