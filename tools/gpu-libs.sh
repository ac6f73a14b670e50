# Sourced by the GPU scripts (with $here set): unpacks the libraries that
# tools/gpu-pack.sh carried as lib.tar.xz, once, and puts them on the path.
if [ ! -d "$here/lib" ] && [ -f "$here/lib.tar.xz" ]; then
  tar xJf "$here/lib.tar.xz" -C "$here"
fi
export LD_LIBRARY_PATH="$here/lib:${LD_LIBRARY_PATH:-}"
