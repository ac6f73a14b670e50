#!/usr/bin/env bash
# Fuzzes the plan loader (parser, validator and, for plans that validate, the
# CPU kernels) with libFuzzer under ASan+UBSan for a bounded time.
#   scripts/fuzz.sh [SECONDS]   (default 60)
# Seeds: test/runtime/plan-corpus/. New inputs go to build-fuzz/corpus/; a
# crash leaves its input in build-fuzz/ (crash-*) and fails the script: add the
# file to test/runtime/plan-corpus/ with its expected error once fixed.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DZCC_BUILD_COMPILER=OFF -DZCC_ENABLE_FUZZER=ON -DZCC_ENABLE_CUDA=OFF >/dev/null
cmake --build build-fuzz --target zrt-plan-fuzzer
mkdir -p build-fuzz/corpus
cd build-fuzz
ASAN_OPTIONS=detect_leaks=0 ./runtime/zrt-plan-fuzzer corpus ../test/runtime/plan-corpus \
  -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=20 -seed=1 -print_final_stats=1 \
  2>&1 | tail -20
