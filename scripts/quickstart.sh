#!/usr/bin/env bash
# Build and run the quickstart example (Release, no tests).
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

cmake -S . -B build/quickstart \
  -DCMAKE_BUILD_TYPE=Release \
  -DEMBER_BUILD_TESTS=OFF \
  -DEMBER_BUILD_EXAMPLES=ON \
  -DEMBER_BUILD_BENCHMARKS=OFF
cmake --build build/quickstart --target quickstart -j2
build/quickstart/examples/quickstart
