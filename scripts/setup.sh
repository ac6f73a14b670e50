#!/usr/bin/env bash
# Installs the Debian 12 packages that zcc's build and tests need. Idempotent:
# it installs only what is missing and says what. Run as root (or with sudo).
#
#   scripts/setup.sh            compiler + runtime + tests
#   scripts/setup.sh --runtime  only what the runtime half needs (no LLVM)
set -euo pipefail

runtime_pkgs=(cmake ninja-build g++ ccache libgtest-dev libprotobuf-dev protobuf-compiler libopenblas-dev
              nlohmann-json3-dev libcli11-dev libxxhash-dev libgloo-dev
              libjs-chart.js libisal-dev  # Chart.js, inlined into the HTML pages; ISA-L's CRC32C
              liburing-dev)               # io_uring: NVMe offload's swap files
compiler_pkgs=(
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools   # MLIR/LLVM 22, FileCheck, lit
  libonnx-dev                                              # ONNX import
  python3 python3-onnx python3-numpy python3-protobuf      # tests write models, .npy files, plans
  clang libclang-rt-14-dev                                 # libFuzzer (scripts/fuzz.sh)
  clang-format                                             # scripts/format.sh --check
  chromium python3-pil python3-jsonschema python3-crc32c   # pages rendered, traces and events checked
)

pkgs=("${runtime_pkgs[@]}")
if [[ "${1:-}" != "--runtime" ]]; then
  pkgs+=("${compiler_pkgs[@]}")
fi

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#pkgs[@]} packages already installed"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
