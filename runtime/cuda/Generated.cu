//===- Generated.cu - kernels the compiler generated (PTX) ---------------===//
//
// zero-fuse-elementwise compiles each fused tree of elementwise arithmetic
// to PTX (MLIR's GPU -> NVVM -> PTX path) and the plan carries it in the
// instruction (Kernel.code). zrun loads each once with the driver API, whose
// entry points come through the runtime (cudaGetDriverEntryPointByVersion):
// zrun links no libcuda, so the same binary still runs where there is no
// GPU. The driver compiles the PTX for the device it runs on.
//
//===----------------------------------------------------------------------===//
#include "cuda/CudaKernels.h"

#include <cuda.h>

#include <map>
#include <string>
#include <vector>

namespace zrt {
namespace {

struct Driver {
  decltype(&cuModuleLoadData) moduleLoadData = nullptr;
  decltype(&cuModuleGetFunction) moduleGetFunction = nullptr;
  decltype(&cuLaunchKernel) launchKernel = nullptr;
  decltype(&cuGetErrorString) errorString = nullptr;
  std::string missing; // entry points not found
};

const Driver &driver() {
  static const Driver d = [] {
    Driver d;
    auto get = [&](const char *name, void **fn) {
      cudaDriverEntryPointQueryResult found;
      if (cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, &found) !=
              cudaSuccess ||
          found != cudaDriverEntryPointSuccess) {
        *fn = nullptr;
        d.missing += std::string(d.missing.empty() ? "" : ", ") + name;
      }
    };
    get("cuModuleLoadData", reinterpret_cast<void **>(&d.moduleLoadData));
    get("cuModuleGetFunction", reinterpret_cast<void **>(&d.moduleGetFunction));
    get("cuLaunchKernel", reinterpret_cast<void **>(&d.launchKernel));
    get("cuGetErrorString", reinterpret_cast<void **>(&d.errorString));
    return d;
  }();
  return d;
}

Status driverStatus(CUresult r, const char *what) {
  if (r == CUDA_SUCCESS)
    return Status::ok();
  const char *text = nullptr;
  if (driver().errorString)
    driver().errorString(r, &text);
  return errorf(what, ": ", text ? text : "CUDA driver error ", (int)r);
}

} // namespace

struct GeneratedKernels {
  /// A module's entries: a thread per element, and (where the compiler
  /// generated it) 8 elements per thread with 16-byte accesses.
  struct Entries {
    CUfunction scalar = nullptr, vector = nullptr;
  };
  /// By the plan's code string (stable while the plan is loaded).
  std::map<const std::string *, Entries> byCode;
};

Status launchGenerated(const KernelCall &c, CudaContext &ctx) {
  if (!c.code)
    return errorf("the plan carries no generated code for this kernel (zcc --target cuda "
                  "generates it)");
  const Driver &d = driver();
  if (!d.missing.empty())
    return errorf("the CUDA driver lacks ", d.missing);
  if (!ctx.generated)
    ctx.generated = std::make_shared<GeneratedKernels>();
  GeneratedKernels::Entries &fn = ctx.generated->byCode[c.code];
  if (!fn.scalar) {
    CUmodule module;
    ZRT_RETURN_IF_ERROR(
        driverStatus(d.moduleLoadData(&module, c.code->c_str()), "loading the generated PTX"));
    ZRT_RETURN_IF_ERROR(driverStatus(d.moduleGetFunction(&fn.scalar, module, "zcc_elementwise"),
                                     "finding zcc_elementwise in the generated PTX"));
    if (d.moduleGetFunction(&fn.vector, module, "zcc_elementwise_v8") != CUDA_SUCCESS)
      fn.vector = nullptr; // a shape whose innermost dimension is not a multiple of 8
  }
  int64_t n = c.out[0].numel();
  if (n == 0)
    return Status::ok();
  // zcc_elementwise(inputs..., outputs..., n): a thread per output element,
  // or 8 when every tensor is 16-byte aligned (the plan's arenas are; a view
  // into a bucket may not be).
  std::vector<void *> pointers;
  bool aligned = fn.vector && n % 8 == 0;
  for (const TensorRef &t : c.in)
    pointers.push_back(t.data);
  for (const TensorRef &t : c.out)
    pointers.push_back(t.data);
  for (void *p : pointers)
    aligned &= reinterpret_cast<uintptr_t>(p) % 16 == 0;
  std::vector<void *> params;
  for (void *&p : pointers)
    params.push_back(&p);
  params.push_back(&n);
  constexpr unsigned kBlock = 256;
  int64_t threads = aligned ? n / 8 : n;
  unsigned blocks = (unsigned)((threads + kBlock - 1) / kBlock);
  return driverStatus(d.launchKernel(aligned ? fn.vector : fn.scalar, blocks, 1, 1, kBlock, 1, 1, 0,
                                     (CUstream)ctx.stream, params.data(), nullptr),
                      "launching the generated kernel");
}

} // namespace zrt
