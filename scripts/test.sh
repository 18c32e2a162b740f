#!/usr/bin/env bash
# ember's full check, run by CI (.ci/run) and by developers: one command, exit status 0 = green.
#
#   1. build the `ci` preset (-O2 -g1 + asserts, -Werror, OpenMP, unity-built unit tests);
#   2. `asan`:   unit tests + examples under AddressSanitizer + UBSan (-O0, -fno-sanitize-recover=all);
#   3. `tsan`:   the [concurrency] tests under ThreadSanitizer;
#   4. `fuzz`:   every libFuzzer harness for EMBER_FUZZ_SECONDS (default 20) s, then every seed and
#                kept crash reproducer replayed once;
#   5. static analysis (scripts/static_analysis.sh: clang-tidy + cppcheck on include/ember);
#   6. the `ci` test suite, last, so its ctest summary closes the log.
#
# EMBER_CHECKS selects phases (default "asan tsan fuzz static"; the ci build and tests always
# run), e.g. EMBER_CHECKS="" scripts/test.sh for the plain suite only.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# shellcheck source=lib/ensure_packages.sh
source scripts/lib/ensure_packages.sh
ensure_packages cmake g++ make libeigen3-dev catch2 libbenchmark-dev nlohmann-json3-dev \
  libcli11-dev libopenblas-dev libopenmpi-dev openmpi-bin clang libclang-rt-14-dev clang-tidy cppcheck

checks=" ${EMBER_CHECKS-asan tsan fuzz static} "
export EMBER_FUZZ_SECONDS="${EMBER_FUZZ_SECONDS:-20}"
summary=()
t_all=$SECONDS

phase() {  # phase <name> <command...>: runs, times and records one step
  local name=$1 t=$SECONDS
  shift
  echo
  echo "==== ember check: $name ===="
  "$@"
  summary+=("$(printf '%-34s %4d s' "$name" $((SECONDS - t)))")
}

ctest_summary() {  # the "N% tests passed ..." line of a ctest run, kept for the final summary
  local log=$1
  grep -E "tests passed, [0-9]+ tests? failed out of" "$log" | tail -1
}

run_ctest() {  # run_ctest <preset> <log>: ctest with output on screen and in <log>
  local preset=$1 log=$2
  ctest --preset "$preset" 2>&1 | tee "$log"
  return "${PIPESTATUS[0]}"
}

mkdir -p build
phase "ci: configure + build" bash -c 'cmake --preset ci >/dev/null && cmake --build --preset ci -j2'

if [[ $checks == *" asan "* ]]; then
  phase "asan: configure + build" bash -c 'cmake --preset asan >/dev/null && cmake --build --preset asan -j2'
  phase "asan: unit tests + examples" run_ctest asan build/asan.ctest.log
  summary+=("    asan: $(ctest_summary build/asan.ctest.log)")
fi

if [[ $checks == *" tsan "* ]]; then
  phase "tsan: configure + build" bash -c 'cmake --preset tsan >/dev/null && cmake --build --preset tsan -j2'
  phase "tsan: [concurrency] tests" run_ctest tsan build/tsan.ctest.log
  summary+=("    tsan: $(ctest_summary build/tsan.ctest.log)")
fi

if [[ $checks == *" fuzz "* ]]; then
  phase "fuzz: configure + build (clang)" bash -c 'cmake --preset fuzz "-DEMBER_FUZZ_SECONDS=$EMBER_FUZZ_SECONDS" >/dev/null && cmake --build --preset fuzz -j2'
  rm -f build/fuzz/tests/fuzz/work/summary.txt
  phase "fuzz: ${EMBER_FUZZ_SECONDS} s per harness + replays" run_ctest fuzz build/fuzz.ctest.log
  summary+=("    fuzz: $(ctest_summary build/fuzz.ctest.log)")
  while read -r line; do summary+=("    $line"); done < build/fuzz/tests/fuzz/work/summary.txt
fi

if [[ $checks == *" static "* ]]; then
  phase "static analysis (clang-tidy, cppcheck)" scripts/static_analysis.sh
fi

echo
echo "==== ember check: summary (the ci suite runs next) ===="
printf '%s\n' "${summary[@]}"
echo "checks so far: $((SECONDS - t_all)) s"

echo
echo "==== ember check: ci test suite ===="
ctest --preset ci
