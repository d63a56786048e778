#!/usr/bin/env bash
# Installs what gradc needs from Debian 12's packages, if anything is missing.
set -euo pipefail
packages=(cmake ninja-build g++ python3 llvm-19-dev libclang-19-dev
          libclang-cpp19-dev clang-19 llvm-19-tools libclang-rt-19-dev
          libgtest-dev libmimalloc-dev libopenblas-dev python3-dev python3-numpy python3-torch
          python3-pytest)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
    missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y \
    --no-install-recommends "${missing[@]}"
fi
