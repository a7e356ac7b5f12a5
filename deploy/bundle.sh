#!/usr/bin/env bash
# deploy/bundle.sh BUILD_DIR OUT_DIR: a relocatable Tessel for a GPU host (or any x86-64 Linux
# host) that has none of the -dev packages this project builds against.
#
#   OUT_DIR/tessel      the launcher: OUT_DIR/tessel worker --server HOST:PORT ... (any subcommand)
#   OUT_DIR/bin/        the tessel executable
#   OUT_DIR/lib/        libtessel_runtime and every shared library tessel and it load, except the
#                       ones the host provides: the C and C++ runtimes and the loader, and the NVIDIA
#                       driver and CUDA toolkit libraries, which must match the host's driver
#   OUT_DIR/include/    tessel/runtime.h and runtime.hpp (to build against the bundled runtime)
#   OUT_DIR/BUILD_INFO  what was bundled: `tessel --version` and the commit
#
# The launcher puts OUT_DIR/lib and the host's CUDA library folders (/usr/local/cuda/...) on the
# loader's path. Exit status 2 on bad arguments, 1 when a library cannot be found.
set -euo pipefail
usage() {
  echo "usage: deploy/bundle.sh BUILD_DIR OUT_DIR (BUILD_DIR: a build of this repository, e.g. build)" >&2
  exit 2
}
[[ $# -eq 2 ]] || usage
build=$1 out=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
exe=$build/cli/tessel
if [[ ! -x $exe ]]; then
  echo "deploy/bundle.sh: $exe is not there: build first (make build, or cmake --build $build)" >&2
  exit 2
fi
runtime=$(ls "$build"/runtime/libtessel_runtime.so.*.*.* 2>/dev/null | head -1 || true)
mkdir -p "$out/bin" "$out/lib" "$out/include/tessel"

# Libraries every host has, or must have in the version that matches its driver.
host_provided='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libresolv|libutil|libstdc\+\+|libgcc_s|libcuda\.so|libnvidia-|libnvrtc|libcudart|libcupti|libnvJitLink|libnvperf)'
status=0
copy_deps() {
  local name arrow path rest
  while read -r name arrow path rest; do
    [[ $arrow == "=>" ]] || continue
    [[ $name =~ $host_provided ]] && continue
    if [[ $path == not ]]; then
      echo "deploy/bundle.sh: $1 needs $name, which this host cannot find" >&2
      status=1
      continue
    fi
    [[ -e $out/lib/$name ]] || cp -L "$path" "$out/lib/$name"
  done < <(ldd "$1")
}

cp -f "$exe" "$out/bin/tessel"
strip --strip-debug "$out/bin/tessel" 2>/dev/null || true
copy_deps "$exe"
if [[ -n $runtime ]]; then
  soname=$(objdump -p "$runtime" | awk '/SONAME/ {print $2}')
  cp -f "$runtime" "$out/lib/$soname"
  ln -sf "$soname" "$out/lib/libtessel_runtime.so"
  copy_deps "$runtime"
  cp -f "$here"/runtime/include/tessel/runtime.h* "$out/include/tessel/" 2>/dev/null || true
fi

cat > "$out/tessel" <<'LAUNCHER'
#!/usr/bin/env bash
# Runs the bundled tessel with the bundle's libraries and the host's CUDA libraries.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
path=$root/lib
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         /usr/local/cuda/extras/CUPTI/lib64; do
  [[ -d $d ]] && path=$path:$d
done
export LD_LIBRARY_PATH=$path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
exec "$root/bin/tessel" "$@"
LAUNCHER
chmod +x "$out/tessel"
{
  "$out/tessel" --version 2>&1 | head -5
  echo "commit: $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)"
} > "$out/BUILD_INFO"
exit $status
