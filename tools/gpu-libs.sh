# Sourced by the GPU scripts (with $here set): unpacks the libraries,
# programs, plans and data that tools/gpu-pack.sh carried as lib.tar.xz,
# bin.tar.xz and pd.tar.xz, once, and puts the libraries on the path.
if [ ! -d "$here/lib" ] && [ -f "$here/lib.tar.xz" ]; then
  tar xJf "$here/lib.tar.xz" -C "$here"
fi
# zrun and zrt-attention-bench, carried as bin.tar.xz (tools/gpu-pack.sh).
if [ ! -x "$here/zrun" ] && [ -f "$here/bin.tar.xz" ]; then
  tar xJf "$here/bin.tar.xz" -C "$here"
fi
# The plans, kernel cases and data, carried as pd.tar.xz (tools/gpu-pack.sh).
if [ ! -d "$here/plans" ] && [ -f "$here/pd.tar.xz" ]; then
  tar xJf "$here/pd.tar.xz" -C "$here"
fi
export LD_LIBRARY_PATH="$here/lib:${LD_LIBRARY_PATH:-}"
# cuDNN (convolutions, runtime/cuda/Cudnn.cpp): PyTorch's pip packages hold one.
cudnn_dir=$(python3 -c 'import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], "lib"))' 2>/dev/null)
[ -n "$cudnn_dir" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$cudnn_dir"
