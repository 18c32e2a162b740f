#!/usr/bin/env bash
# Runs ember's benchmark suite at 1 and 2 threads, then regenerates the committed summary
# (bench/results/summary.json), the plots (bench/results/*.png) and the table in
# bench/README.md with bench/plot.py.
#
# Usage: cmake --preset release && cmake --build --preset release -j2 && bench/run_suite.sh
# Env:   BUILD_DIR (default build/release), THREADS (default "1 2"), MIN_TIME (default 0.2),
#        REPS (default 5).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build=${BUILD_DIR:-build/release}
raw="$build/bench-results"
mkdir -p "$raw" bench/results

# glibc would hand every large tensor LibTorch allocates back to the kernel and page-fault it in
# again on the next call; keep freed memory in the heap instead, as a caching allocator would.
# This favours the baselines (ember's kernels allocate little), it never slows them down.
export GLIBC_TUNABLES=glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=4294967296

# Idle OpenMP threads sleep instead of spinning: on a shared, oversubscribed machine spinning
# workers steal the cores the next parallel region needs (measured: 2-thread lookups 10x slower
# with the default policy). Applies to ember, Eigen and LibTorch alike.
export OMP_WAIT_POLICY=passive

for t in ${THREADS:-1 2}; do
  for b in bench_lookup bench_sparse_grad bench_tied_logits bench_tied_logits_blas bench_decode; do
    [[ -x "$build/bench/$b" ]] || { echo "skip $b (not built)"; continue; }
    # Decoding calls are below the threading threshold: one thread count is enough.
    [[ $b == bench_decode && $t != 1 ]] && continue
    echo "== $b, $t thread(s)"
    OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t "$build/bench/$b" \
      --benchmark_repetitions="${REPS:-5}" --benchmark_report_aggregates_only=true \
      --benchmark_min_time="${MIN_TIME:-0.2}" \
      --benchmark_out="$raw/${b}_t$t.json" --benchmark_out_format=json
  done
done

/usr/bin/python3 bench/plot.py "$raw" bench/results bench/README.md
