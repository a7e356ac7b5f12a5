#!/bin/sh
# Installs the build's runtime into a temporary prefix and builds the C example against the
# installed copy, through pkg-config and through the CMake package, then runs both builds.
#   installed_runtime_test.sh BUILD_DIR EXAMPLES_DIR TESSEL CMAKE
set -eu
build=$1 examples=$2 tessel=$3 cmake=$4
work=$(mktemp -d "${TMPDIR:-/tmp}/tessel_install_XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log"
test -f "$prefix/include/tessel/runtime.h"
test -f "$prefix/include/tessel/runtime.hpp"

echo "== pkg-config"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
pkg-config --modversion tessel_runtime
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror -o "$work/deploy_pc" "$examples/deploy_matmul.c" \
  $(pkg-config --cflags --libs tessel_runtime) -lm
# The binary finds the installed library (not the build's) through the rpath pkg-config gave.
linked=$(ldd "$work/deploy_pc" | awk '/libtessel_runtime/ {print $3}')
test "$(realpath "$linked")" = "$(realpath "$prefix/lib/libtessel_runtime.so.0")"
"$work/deploy_pc" "$tessel" | tail -1 | grep -qx ok

echo "== find_package(TesselRuntime)"
"$cmake" -S "$examples" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  >"$work/configure.log"
"$cmake" --build "$work/cmake" >"$work/build.log"
"$work/cmake/deploy_matmul" "$tessel" | tail -1 | grep -qx ok
echo "installed runtime: ok"
