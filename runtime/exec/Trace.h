//===- Trace.h - zrun --trace: the step as a Chrome trace ---------*- C++ -*-===//
//
// The slices the executors recorded (ExecutorBase::TraceSlice) written in
// the Chrome trace-event format, which Perfetto (ui.perfetto.dev) and
// chrome://tracing open: a process per rank, a thread per track (the steps
// and their programs, the compute stream, communication, copies), each
// instruction a complete event ("ph": "X") named by its kind as --profile
// names it, with its ONNX node, operand shapes, bytes and FLOPs as args.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_EXEC_TRACE_H
#define ZRT_EXEC_TRACE_H

#include "exec/Interpreter.h"

#include <string>
#include <vector>

namespace zrt {

/// One rank's slices.
struct RankTrace {
  int rank = 0;
  std::vector<ExecutorBase::TraceSlice> slices;
};

/// The trace-event JSON of |ranks| (times from the earliest slice, in
/// microseconds); |backend| ("cpu", "cuda") and |planPath| go into its
/// metadata.
std::string traceJson(const plan::Plan &plan, const std::vector<RankTrace> &ranks,
                      const std::string &backend, const std::string &planPath);

/// Writes traceJson to |path| (through a temporary file and a rename, so a
/// reader never sees half a trace).
Status writeTrace(const std::string &path, const plan::Plan &plan,
                  const std::vector<RankTrace> &ranks, const std::string &backend,
                  const std::string &planPath);

/// zrun trace-page: the timeline page (observe/Pages.h, PageKind::Trace) of
/// the Chrome traces |traces| (zrun's, or any with complete events: one
/// run's file, or the per-rank files of a launched job, merged by rank)
/// written to |out|. |slices| gets the number of complete events drawn.
Status writeTracePage(const std::vector<std::string> &traces, const std::string &out,
                      size_t &slices);

/// The file rank |rank| of a launched job writes for --trace |path|: rank
/// 0 the path itself, rank r "NAME.rank<r>.json" beside it.
std::string rankTracePath(const std::string &path, int rank);

} // namespace zrt

#endif // ZRT_EXEC_TRACE_H
