#!/usr/bin/env bash
# Installs every Debian package Flotilla needs. Idempotent: installs only what is missing.
# Nothing is downloaded from anywhere but the machine's configured Debian archive.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config ccache git
  libgtest-dev libgmock-dev libbenchmark-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libbpf-dev bpftool libseccomp-dev libboost-dev
  libsqlite3-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libspdlog-dev libssl-dev
  clang llvm
  libopenblas-dev libopenblas0-pthread
  libpcre2-dev libutf8proc-dev
  python3 python3-torch python3-grpcio python3-protobuf python3-numpy python3-jinja2
  iproute2 uidmap runc apparmor debootstrap
  chromium
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all ${#PACKAGES[@]} packages present"
fi

if [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "install-deps: CUDA toolkit found under /usr/local/cuda"
else
  echo "install-deps: no CUDA toolkit under /usr/local/cuda; the CUDA backend will be skipped"
fi
