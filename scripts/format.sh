#!/usr/bin/env bash
# clang-format (.clang-format: LLVM style, 100 columns) over the C++ and CUDA
# sources of the repository (not runtime/third_party).
#   scripts/format.sh          reformat in place
#   scripts/format.sh --check  list what is not formatted and fail (CI)
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' | grep -v '^runtime/third_party/')
if [[ "${1:-}" == "--check" ]]; then
  bad=()
  for f in "${files[@]}"; do
    clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
  done
  if [[ ${#bad[@]} -gt 0 ]]; then
    echo "format: ${#bad[@]} files need clang-format (run scripts/format.sh): ${bad[*]}" >&2
    exit 1
  fi
  echo "format: ${#files[@]} files clean"
else
  clang-format -i "${files[@]}"
fi
