#!/usr/bin/env bash
# CTest deploy_bundle: deploy/bundle.sh makes a bundle whose launcher runs tessel from another
# folder, without the host-provided libraries, and refuses a missing build with its message.
# Usage: deploy/bundle_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$here/bundle.sh" "$build" "$tmp/b" > "$tmp/out" 2>&1 || fail "bundle.sh failed: $(cat "$tmp/out")"
mv "$tmp/b" "$tmp/moved"  # relocatable: nothing refers to where it was made
[[ -x $tmp/moved/tessel && -x $tmp/moved/bin/tessel ]] || fail "no launcher or executable"
ls "$tmp/moved/lib" | grep -Eq '^(libc\.so|libstdc\+\+|libcuda\.so|libnvrtc)' &&
  fail "host-provided libraries were bundled: $(ls "$tmp/moved/lib" | grep -E '^(libc\.|libstdc|libcuda|libnvrtc)')"
ls "$tmp/moved/lib" | grep -q '^libtessel_runtime\.so\.' || fail "libtessel_runtime is not in lib/"
[[ -f $tmp/moved/include/tessel/runtime.h ]] || fail "runtime.h is not in include/"
v=$(cd / && env -i PATH=/usr/bin:/bin "$tmp/moved/tessel" --version 2>&1) || fail "tessel --version: $v"
[[ $v == tessel* ]] || fail "unexpected --version output: $v"
grep -q "^commit: " "$tmp/moved/BUILD_INFO" || fail "BUILD_INFO has no commit line"
code=$(cd / && env -i PATH=/usr/bin:/bin "$tmp/moved/tessel" lower -w "matmul(M=16, N=16, K=16)" -t host --emit cpp 2>&1) ||
  fail "tessel lower from the bundle: $code"
[[ $code == *tessel_matmul* ]] || fail "tessel lower printed no kernel"

msg=$("$here/bundle.sh" "$tmp/nothing" "$tmp/x" 2>&1)
[[ $? -eq 2 && $msg == *"$tmp/nothing/cli/tessel is not there: build first"* ]] ||
  fail "a missing build gave: $msg"
msg=$("$here/bundle.sh" "$build" 2>&1)
[[ $? -eq 2 && $msg == usage:* ]] || fail "missing OUT_DIR gave: $msg"
echo "deploy_bundle: ok"
