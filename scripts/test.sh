#!/usr/bin/env bash
# ember's full check, run by CI (.ci/run) and by developers: one command, exit status 0 = green.
#
# Two lanes run at the same time, so both cores stay busy while one lane configures, links or
# waits on a serial test:
#   g++ lane:    `ci` build (-O2 -g1 + asserts, -Werror, OpenMP, unity-built unit tests)
#                -> the ci test suite -> `tsan`: the [concurrency] tests under ThreadSanitizer;
#   clang lane:  `asan` build (AddressSanitizer + UBSan, -O0, -fno-sanitize-recover=all, -Werror)
#                -> unit tests + examples under it (the ISA and OpenMP mixed-unit programs run in
#                the g++ lane, the OpenMP one under ASan there) -> `fuzz` build -> static analysis
#                (scripts/static_analysis.sh: clang-tidy + cppcheck on include/ember).
#                The asan preset compiles the test files whose tests run longest at -O1
#                (EMBER_O1_TESTS) and runs each test file's cases in one process
#                (EMBER_TESTS_PER_FILE): docs/dev/reliability.md gives the cost of each phase.
# Then, alone (libFuzzer runs for wall time, so it gets both cores to itself): every libFuzzer
# harness for EMBER_FUZZ_SECONDS (default 20) s, then every seed and kept crash reproducer replayed
# once. Each lane's log is printed when it ends; the ci suite's ctest output is printed last.
#
# EMBER_CHECKS selects phases (default "asan tsan fuzz static"; the ci build and tests always
# run), e.g. EMBER_CHECKS="" scripts/test.sh for the plain suite only.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# shellcheck source=lib/ensure_packages.sh
source scripts/lib/ensure_packages.sh
ensure_packages cmake g++ make libeigen3-dev catch2 libbenchmark-dev nlohmann-json3-dev \
  libcli11-dev libopenblas-dev libopenmpi-dev openmpi-bin clang libclang-rt-14-dev clang-tidy cppcheck \
  qemu-user fasttext python3-fasttext

checks=" ${EMBER_CHECKS-asan tsan fuzz static} "
export EMBER_FUZZ_SECONDS="${EMBER_FUZZ_SECONDS:-20}"
t_all=$SECONDS

mkdir -p build
rm -f build/check.*.summary build/ci.ctest.log

has() { [[ $checks == *" $1 "* ]]; }

phase() {  # phase <lane> <name> <command...>: runs, times and records one step; returns its status
  # The status is returned explicitly: called as `phase ... || status=1`, bash turns `set -e` off
  # inside the function, and a failing step followed by the printf would otherwise return 0 (a
  # failing fuzz run once passed CI that way).
  local lane=$1 name=$2 t=$SECONDS rc=0
  shift 2
  echo
  echo "==== ember check: $name ===="
  "$@" || rc=$?
  if ((rc == 0)); then
    printf '%-40s %4d s\n' "$name" $((SECONDS - t)) >> "build/check.$lane.summary"
  else
    printf '%-40s %4d s  FAILED (exit %d)\n' "$name" $((SECONDS - t)) "$rc" >> "build/check.$lane.summary"
  fi
  return "$rc"
}

ctest_summary() {  # the "N% tests passed ..." line of a ctest run
  grep -E "tests passed, [0-9]+ tests? failed out of" "$1" | tail -1
}

run_ctest() {  # run_ctest <preset> <log>: ctest with output on screen and in <log>
  local preset=$1 log=$2
  ctest --preset "$preset" 2>&1 | tee "$log"
  return "${PIPESTATUS[0]}"
}

build() {  # build <preset> [configure args...]
  local preset=$1
  shift
  cmake --preset "$preset" "$@" >/dev/null || return
  # ember_tests first where the preset has it: its unity batches are the build's longest compiles
  # (minutes each), and in make's own order they start last, ending the lane on one or two jobs.
  if [[ $preset == ci || $preset == asan ]]; then
    cmake --build --preset "$preset" -j2 --target ember_tests || return
  fi
  cmake --build --preset "$preset" -j2
}

lane_gcc() {
  phase gcc "ci: configure + build" build ci
  # Its output goes to build/ci.ctest.log only; it is printed at the very end.
  phase gcc "ci: test suite" bash -c 'ctest --preset ci > build/ci.ctest.log 2>&1'
  if has tsan; then
    phase gcc "tsan: configure + build" build tsan
    phase gcc "tsan: [concurrency] tests" run_ctest tsan build/tsan.ctest.log
  fi
}

lane_clang() {
  if has asan; then
    phase clang "asan: configure + build" build asan
    phase clang "asan: unit tests + examples" run_ctest asan build/asan.ctest.log
  fi
  if has fuzz; then
    phase clang "fuzz: configure + build" build fuzz "-DEMBER_FUZZ_SECONDS=$EMBER_FUZZ_SECONDS"
  fi
  if has static; then
    phase clang "static analysis (clang-tidy, cppcheck)" scripts/static_analysis.sh
  fi
}

echo "==== ember check: g++ lane (ci, tsan) and clang lane (asan, fuzz build, static) at once ===="
lane_gcc > build/check.gcc.log 2>&1 &
pid_gcc=$!
lane_clang > build/check.clang.log 2>&1 &
pid_clang=$!
status=0
for lane in clang gcc; do
  pid_var="pid_$lane"
  if wait "${!pid_var}"; then
    echo "---- $lane lane passed after $((SECONDS - t_all)) s; its log:"
  else
    status=1
    echo "---- $lane lane FAILED after $((SECONDS - t_all)) s; its log:"
  fi
  cat "build/check.$lane.log"
done

if ((status == 0)) && has fuzz; then
  rm -f build/fuzz/tests/fuzz/work/summary.txt
  phase fuzz "fuzz: ${EMBER_FUZZ_SECONDS} s per harness + replays" run_ctest fuzz build/fuzz.ctest.log || status=1
fi

echo
echo "==== ember check: summary ===="
for lane in gcc clang fuzz; do
  [[ -f build/check.$lane.summary ]] && cat "build/check.$lane.summary"
done
for run in asan tsan fuzz; do
  if has "$run" && [[ -f build/$run.ctest.log ]]; then echo "    $run: $(ctest_summary "build/$run.ctest.log")"; fi
done
if [[ -f build/fuzz/tests/fuzz/work/summary.txt ]]; then sed 's/^/    /' build/fuzz/tests/fuzz/work/summary.txt; fi
echo "all checks: $((SECONDS - t_all)) s wall"

echo
echo "==== ember check: ci test suite ===="
if [[ -f build/ci.ctest.log ]]; then
  cat build/ci.ctest.log
else
  echo "(not run: the ci build failed)"
fi
exit "$status"
