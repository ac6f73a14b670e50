//===- DeviceStats.h - what the CUDA executors measure -----------*- C++ -*-===//
//
// Private to runtime/cuda: the launch counts (native or host fallback) and
// the device memory this process's executors used, which cudaStats()
// reports (cuda/CudaExecutor.h).
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_CUDA_DEVICESTATS_H
#define ZRT_CUDA_DEVICESTATS_H

#include <string>

namespace zrt {

/// Records the device memory zrun's allocations (arenas, workspace, scratch,
/// cuBLASLt, NCCL) use on |device| now, keeping the maximum.
void measureDeviceMemory(int device);

/// The baseline of measureDeviceMemory: once per device, before anything of
/// ours is allocated there (the context first: cudaFree(0) creates it).
void captureBaseline(int device);

/// One launch of kernel |name|, native or on the host fallback.
void countLaunch(bool native, const std::string &name);

} // namespace zrt

#endif // ZRT_CUDA_DEVICESTATS_H
