//===- MemoryMap.h - a plan's memory over the step ---------------*- C++ -*-===//
//
// What zcc --emit=memory-json / memory-html and zrun train --memory-page
// draw: every buffer of a plan's arenas with its byte range and, for the
// device and host temporaries, its lifetime over the step's instructions
// (micro_step, then apply), classified by kind (parameters, gradients,
// optimizer state, activations, gathered parameters, communication
// buffers, offloaded host state); the arena's occupancy at each
// instruction, its peak, and the buffers live there by ONNX node. A plan is
// the same program on every rank, so this is every rank's map; measured
// figures (zrun) come per rank beside it.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_OBSERVE_MEMORYMAP_H
#define ZRT_OBSERVE_MEMORYMAP_H

#include "plan/plan.pb.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zrt {

/// What a run measured (zrun): per rank, the arenas it allocated; per GPU,
/// the most device memory in use at a program's end (cudaMemGetInfo).
struct MeasuredMemory {
  std::string label; // "rank 0 allocated", "GPU 0 in use"
  int64_t bytes = 0;
};

/// The memory map of |plan| as JSON (the schema is docs/observability.md's):
/// "arenas", "static" (whole-step bytes by kind), "timeline" (per
/// instruction: live and high-water bytes of the device arena), "buffers",
/// "peak" (where the device arena's high-water mark is reached, the
/// buffers live there) and "peak_bytes" (static + that high-water mark
/// rounded up to the arenas' 64-byte alignment: what the runtime allocates). |source| names the
/// plan in the page.
std::string memoryMapJson(const plan::Plan &plan, const std::string &source,
                          const std::vector<MeasuredMemory> &measured = {});

/// The self-contained HTML page that draws memoryMapJson (Chart.js
/// inlined: no network).
std::string memoryPageHtml(const plan::Plan &plan, const std::string &source,
                           const std::vector<MeasuredMemory> &measured = {});

/// A matmul-family kernel's FLOPs (2 x output elements x the contraction,
/// as zcc's report counts them); 0 for other kernels.
double matmulFlops(const plan::Plan &plan, const plan::Kernel &kernel);

/// One rank's matmul FLOPs per optimizer step (micro_step's, times the
/// accumulation steps): what the dashboard's TFLOP/s and MFU divide.
double stepMatmulFlops(const plan::Plan &plan);

} // namespace zrt

#endif // ZRT_OBSERVE_MEMORYMAP_H
