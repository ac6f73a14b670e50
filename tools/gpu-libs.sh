# Sourced by the GPU scripts (with $here set): unpacks the libraries and
# programs that tools/gpu-pack.sh carried as lib.tar.xz and bin.tar.xz, once,
# and puts the libraries on the path.
if [ ! -d "$here/lib" ] && [ -f "$here/lib.tar.xz" ]; then
  tar xJf "$here/lib.tar.xz" -C "$here"
fi
# zrun and zrt-attention-bench, carried as bin.tar.xz (tools/gpu-pack.sh).
if [ ! -x "$here/zrun" ] && [ -f "$here/bin.tar.xz" ]; then
  tar xJf "$here/bin.tar.xz" -C "$here"
fi
export LD_LIBRARY_PATH="$here/lib:${LD_LIBRARY_PATH:-}"
