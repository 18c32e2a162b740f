#!/usr/bin/env bash
# Build and run the quickstart example (Release, no tests).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# shellcheck source=lib/ensure_packages.sh
source scripts/lib/ensure_packages.sh
ensure_packages cmake g++ make libeigen3-dev

cmake -S . -B build/quickstart \
  -DCMAKE_BUILD_TYPE=Release \
  -DEMBER_BUILD_TESTS=OFF \
  -DEMBER_BUILD_EXAMPLES=ON \
  -DEMBER_BUILD_BENCHMARKS=OFF
cmake --build build/quickstart --target quickstart -j2
build/quickstart/examples/quickstart
