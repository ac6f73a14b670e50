#!/usr/bin/env bash
# Fuzzes the readers of untrusted files with libFuzzer under ASan+UBSan, each
# for a bounded time:
#   plan       the plan loader (parser, validator and, for plans that
#              validate, the CPU kernels)       seeds test/runtime/plan-corpus
#   manifest   checkpoint manifests and export  seeds test/fuzz/corpus/manifest
#   hostfile   hostfiles, --include/--exclude   seeds test/fuzz/corpus/hostfile
#   npy        .npy arrays and token files      seeds test/fuzz/corpus/npy
#   safetensors safetensors headers and reads   seeds test/fuzz/corpus/safetensors
#   safetensors-index  a checkpoint folder's index JSON  seeds test/fuzz/corpus/safetensors-index
#   trace-page Chrome traces for zrun trace-page  seeds test/fuzz/corpus/trace-page
#   deepspeed  DeepSpeed JSON configs (zcc)     seeds ../shared/ds_configs
#   export-record  an ONNX model's zcc.* metadata (zcc)  seeds test/fuzz/corpus/export-record
#
#   scripts/fuzz.sh [SECONDS [TARGET...]]   (default 60 s, every target;
#                                            FUZZ_JOBS at once, default nproc)
# FUZZ_TIMEOUT (default 20 s) is the longest one input may run: libFuzzer
# measures wall time, so a long run on a loaded machine wants more.
# New inputs go to build-fuzz/corpus-TARGET/; a crash leaves its input in
# build-fuzz/ (crash-*) and fails the script: add it to the target's seeds
# once fixed.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] ||
  targets=(plan manifest hostfile npy safetensors safetensors-index trace-page deepspeed export-record)
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DZCC_BUILD_COMPILER=OFF -DZCC_ENABLE_FUZZER=ON -DZCC_ENABLE_CUDA=OFF >/dev/null
cmake --build build-fuzz --target zrt-plan-fuzzer zrt-manifest-fuzzer zrt-hostfile-fuzzer \
  zrt-npy-fuzzer zrt-safetensors-fuzzer zrt-safetensors-index-fuzzer zrt-trace-page-fuzzer
# The DeepSpeed config and export record readers are compiler code (LLVM's
# JSON): built here against LLVM 22's shared library, the readers themselves
# instrumented.
llvm=/usr/lib/llvm-22
compiler_fuzzer() { # NAME SOURCE...: build-fuzz/zcc-NAME-fuzzer, rebuilt when a source is newer
  local out=build-fuzz/zcc-$1-fuzzer src stale=0
  shift
  for src in "$@"; do [[ $out -nt $src ]] || stale=1; done
  [[ $stale == 0 ]] && return
  clang++ -std=c++17 -O1 -g -fno-exceptions -fno-rtti -fno-omit-frame-pointer \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Iinclude -Iruntime \
    -I$llvm/include "$@" -L$llvm/lib -Wl,-rpath,$llvm/lib -lLLVM-22 -o "$out"
}
compiler_fuzzer deepspeed lib/Config/DeepSpeedConfig.cpp test/fuzz/DeepSpeedConfigFuzzer.cpp
compiler_fuzzer export-record lib/Import/Onnx/ExportRecord.cpp test/fuzz/ExportRecordFuzzer.cpp
seeds() {
  case $1 in
    plan) echo test/runtime/plan-corpus ;;
    deepspeed) echo ../shared/ds_configs ;;
    *) echo test/fuzz/corpus/$1 ;;
  esac
}
# One fuzzer per core (FUZZ_JOBS, default nproc): each is single-threaded.
# Each target's summary is printed whole once it ends; any failure fails the
# script after the rest have run.
fuzz_one() {
  local t=$1 binary=build-fuzz/runtime/zrt-$1-fuzzer
  [[ $t == deepspeed || $t == export-record ]] && binary=build-fuzz/zcc-$t-fuzzer
  mkdir -p build-fuzz/corpus-$t
  (cd build-fuzz && ASAN_OPTIONS=detect_leaks=0 "../$binary" "corpus-$t" "../$(seeds $t)" \
    -max_total_time="$seconds" -rss_limit_mb=2048 -timeout="${FUZZ_TIMEOUT:-20}" -seed=1 \
    -print_final_stats=1 >"log-$t.txt" 2>&1)
}
summary() {
  echo "== fuzz $1 ($seconds s)"
  grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb|==[0-9]+==|SUMMARY|Done)|crash-|deadly signal" \
    "build-fuzz/log-$1.txt" | tail -8 || true
}
jobs=${FUZZ_JOBS:-$(nproc)}
failed=()
for ((i = 0; i < ${#targets[@]}; i += jobs)); do
  batch=("${targets[@]:i:jobs}")
  pids=()
  for t in "${batch[@]}"; do
    fuzz_one "$t" &
    pids+=($!)
  done
  for j in "${!batch[@]}"; do
    if wait "${pids[$j]}"; then summary "${batch[$j]}"; else
      summary "${batch[$j]}"
      failed+=("${batch[$j]}")
    fi
  done
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz.sh: failed: ${failed[*]} (logs in build-fuzz/log-TARGET.txt, inputs in build-fuzz/crash-*)" >&2
  exit 1
fi
