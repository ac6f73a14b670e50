//===- NoCuda.cpp - zrun built without the CUDA backend -------------------===//
#include "comm/Rendezvous.h"
#include "cuda/CudaExecutor.h"

namespace zrt {

bool cudaUsable(std::string &why) {
  why = "this zrun was built without CUDA (configure with -DZCC_ENABLE_CUDA=ON where the "
        "CUDA toolkit is installed)";
  return false;
}

CudaStats cudaStats() { return {}; }

bool cudaRunsNatively(const plan::Plan &, const plan::Kernel &) { return false; }

Status makeNcclCommunicator(const LaunchEnv &, int, double, std::unique_ptr<Communicator> &) {
  std::string why;
  cudaUsable(why);
  return errorf("multi-process runs use NCCL: ", why);
}

Status benchDeviceCollective(Communicator &, BenchCollective, int64_t, CommType, int, int, double &,
                             bool &) {
  std::string why;
  cudaUsable(why);
  return errorf("comm-bench --backend cuda: ", why);
}

std::unique_ptr<ExecutorBase> makeCudaExecutor(const plan::Plan &, int, Communicator *, int,
                                               const CudaOptions &, Status &status) {
  std::string why;
  cudaUsable(why);
  status = errorf("--backend cuda: ", why);
  return nullptr;
}

} // namespace zrt
