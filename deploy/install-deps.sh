#!/usr/bin/env bash
# Installs every Debian package Tessel's build and tests need. Idempotent: packages already
# installed are skipped, and nothing is done when all are present. Works as root or through sudo.
# Nothing is downloaded at build time; the CUDA toolkit (/usr/local/cuda) is optional and not
# installed here.
set -euo pipefail

packages=(
  build-essential cmake g++ make pkg-config
  libabsl-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libsqlite3-dev libxgboost-dev libjemalloc-dev
  libssl-dev openssl
  libcpp-httplib-dev python3-yaml
  clang-format
  python3 python3-grpcio python3-protobuf
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

if [[ $(id -u) -eq 0 ]]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
else
  echo "install-deps: need root or sudo to install: ${missing[*]}" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
