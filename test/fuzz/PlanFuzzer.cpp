//===- PlanFuzzer.cpp - libFuzzer target for the plan loader --------------===//
//
// Feeds arbitrary bytes to the plan parser and validator; a plan that
// validates is also run (with zeroed inputs), since validation promises that
// running it cannot touch memory outside its arenas. Built with
// -DZCC_ENABLE_FUZZER=ON and clang (scripts/fuzz.sh); seeds:
// test/runtime/plan-corpus/.
//
//===----------------------------------------------------------------------===//
#include "exec/Executor.h"
#include "plan/PlanLoader.h"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  zrt::plan::Plan plan;
  std::string bytes(reinterpret_cast<const char *>(data), size);
  if (!zrt::parsePlan(bytes, plan))
    return 0;
  // Keep runs small: the validator allows arenas up to 1 TiB.
  int64_t total = plan.device_arena_bytes() + plan.state_arena_bytes() +
                  plan.constant_arena_bytes() + plan.input_arena_bytes() + plan.host_arena_bytes();
  if (total > (int64_t(64) << 20))
    return 0;
  zrt::Executor executor(plan);
  for (const zrt::plan::Program &program : plan.programs()) {
    // Element counts bound the work too.
    int64_t work = 0;
    for (const auto &inst : program.instructions())
      for (int index : inst.kernel().outputs())
        work += executor.buffer(index).numel();
    if (work > (int64_t(1) << 22))
      continue;
    (void)executor.run(program);
  }
  return 0;
}
