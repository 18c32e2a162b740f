#!/usr/bin/env bash
# Configure, build and run the full ember test suite (CMake preset "ci").
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

required_pkgs=(cmake g++ make libeigen3-dev catch2 libbenchmark-dev)
missing=()
for pkg in "${required_pkgs[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]]; then
    echo "Installing missing packages: ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  else
    echo "warning: missing Debian packages (not root, not installing): ${missing[*]}" >&2
  fi
fi

cmake --preset ci
cmake --build --preset ci -j2
ctest --preset ci
