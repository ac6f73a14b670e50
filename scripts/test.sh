#!/usr/bin/env bash
# Runs every test of zcc, as CI does: installs what is missing (Debian
# packages), builds the compiler and runtime, and runs
#   1. the full suite (lit tests of the compiler, runtime unit tests);
#   2. the runtime alone, configured without LLVM (ZCC_BUILD_COMPILER=OFF);
#   3. the suite again under AddressSanitizer + UBSan, which is where the
#      malformed-model and malformed-plan tests prove that bad input never
#      corrupts memory (the importer's mutation tests run only here). Seven
#      long matrices (ZeRO stages x world sizes, offload, mixed precision,
#      the mesh, 16-bit collectives, the kernel cases, the architectures) say
#      `UNSUPPORTED: asan`: their code runs under the sanitizers through the
#      shorter tests: the last three to leave took 386 of the pass's 1,609 s
#      of test time (the pass took 652 s of 2 cores after, 811 before).
#      Built at -O1 with line tables only (-g1), which halves its compile
#      time and is what sanitizer builds usually use; the TableGen-heavy
#      dialect files at -O0 (CMakeLists.txt says why);
#   4. 45 s of libFuzzer on each untrusted-file reader, as many at once as
#      there are cores (scripts/fuzz.sh; 45 rather than 60 s keeps a cold
#      CI's 2 cores a minute further under the 50 minutes).
# First of all (seconds): clang-format over the sources (scripts/format.sh --check).
# Build trees: build/, build-runtime/, build-asan/, build-fuzz/ (reused).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

scripts/setup.sh

echo "== format"
scripts/format.sh --check

echo "== build (Release) and test"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"

echo "== runtime alone, without LLVM"
cmake -S . -B build-runtime -G Ninja -DCMAKE_BUILD_TYPE=Release -DZCC_BUILD_COMPILER=OFF -DZCC_ENABLE_CUDA=OFF >/dev/null
cmake --build build-runtime -j "$jobs"
ctest --test-dir build-runtime --output-on-failure -j "$jobs"

echo "== AddressSanitizer + UBSan"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DZCC_ENABLE_SANITIZERS=ON -DZCC_ENABLE_CUDA=OFF >/dev/null
cmake --build build-asan -j "$jobs"
ctest --test-dir build-asan --output-on-failure -j "$jobs"

echo "== fuzz the readers of untrusted files (libFuzzer, 45 s each)"
scripts/fuzz.sh 45
