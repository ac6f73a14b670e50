//===- DeviceStats.cu - devices, launch counts and measured memory --------===//
//
// What zrun asks the CUDA backend before and after a run: whether a device
// is usable, which kernels ran natively, how much device memory the
// executors used; and the NCCL communicator of a launched job.
//
//===----------------------------------------------------------------------===//
#include "cuda/CudaExecutor.h"
#include "cuda/CudaKernels.h"
#include "cuda/DeviceStats.h"
#include "cuda/Nccl.h"

#include "plan/PlanLoader.h"

#include <mutex>
#include <optional>

namespace zrt {
namespace {

std::mutex statsMutex;
CudaStats stats;

/// Free device memory when this process created its CUDA context, before any
/// allocation of ours, by device: what measured device memory is against.
std::map<int, size_t> freeAtStart;

/// Records the device memory zrun's allocations (arenas, workspace, scratch,
/// cuBLASLt, NCCL) use on |device| now, keeping the maximum.
} // namespace

void measureDeviceMemory(int device) {
  size_t freeBytes = 0, total = 0;
  if (cudaMemGetInfo(&freeBytes, &total) != cudaSuccess)
    return;
  std::lock_guard<std::mutex> lock(statsMutex);
  auto it = freeAtStart.find(device);
  if (it == freeAtStart.end() || freeBytes > it->second)
    return;
  int64_t used = (int64_t)(it->second - freeBytes);
  int64_t &peak = stats.deviceBytes[device];
  peak = std::max(peak, used);
}

/// The baseline of measureDeviceMemory: once per device, before anything of
/// ours is allocated there (the context first: cudaFree(0) creates it).
void captureBaseline(int device) {
  std::lock_guard<std::mutex> lock(statsMutex);
  if (freeAtStart.count(device))
    return;
  size_t freeBytes = 0, total = 0;
  if (cudaSetDevice(device) == cudaSuccess && cudaFree(0) == cudaSuccess &&
      cudaMemGetInfo(&freeBytes, &total) == cudaSuccess)
    freeAtStart[device] = freeBytes;
}

void countLaunch(bool native, const std::string &name) {
  std::lock_guard<std::mutex> lock(statsMutex);
  ++(native ? stats.native : stats.fallback)[name];
}

bool cudaUsable(std::string &why) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    why = std::string("no usable CUDA device (") + cudaGetErrorString(e) + ")";
    return false;
  }
  if (count == 0) {
    why = "no CUDA device";
    return false;
  }
  return true;
}

Status makeNcclCommunicator(const LaunchEnv &env, int device, double timeoutSeconds,
                            std::unique_ptr<Communicator> &out) {
  std::string why;
  if (!cudaUsable(why))
    return errorf("rank ", env.rank, ": multi-process runs need a GPU: ", why);
  if (device < 0) {
    int count = 1;
    cudaGetDeviceCount(&count);
    device = env.localRank % count;
  }
  captureBaseline(device);
  std::unique_ptr<NcclCommunicator> nccl;
  ZRT_RETURN_IF_ERROR(NcclCommunicator::create(env, device, timeoutSeconds, nccl));
  out = std::move(nccl);
  return Status::ok();
}

bool cudaRunsNatively(const plan::Plan &plan, const plan::Kernel &k) {
  std::optional<KernelId> id = lookupKernel(k.name());
  return id && hasCudaKernel(*id, describeKernel(plan, k));
}

CudaStats cudaStats() {
  std::lock_guard<std::mutex> lock(statsMutex);
  return stats;
}

} // namespace zrt
