#!/usr/bin/env python3
"""Compares ember's benchmarks between two builds on the same machine, back to back.

Runs each benchmark binary of the BEFORE and AFTER build directories alternately, ROUNDS times
each, so both see the same machine state, and prints the median time of every benchmark on each
side and their ratio (before / after: above 1 means the after build is faster).

Usage: bench/compare_builds.py BEFORE_BUILD AFTER_BUILD [--rounds 3] [--reps 3]
           [--min-time 0.1] [--only REGEX] [--out FILE.json]
Both builds are `cmake --preset release` trees (benchmarks in <build>/bench/). One thread
(OMP_NUM_THREADS=1) unless the environment says otherwise.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

# (binary, filter): ember's own cases of each capability; baselines and peers are left out.
CASES = [
    ("bench_lookup", "ember_forward|ember_fused|ember_unfused"),
    ("bench_decode", "ember_forward|ember_fused"),
    ("bench_sparse_grad", "ember_backward"),
    ("bench_bag", "/ember/"),
    ("bench_reduced", "BM_Lookup"),
    ("bench_tied_logits", "ember_logits|small_logits/int8/.*/n(1|8)/quantized/cold"),
    ("bench_gguf", "BM_Lookup<"),
]


def run(binary, bench_filter, reps, min_time):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    cmd = [binary, f"--benchmark_filter={bench_filter}", f"--benchmark_repetitions={reps}",
           f"--benchmark_min_time={min_time}", "--benchmark_out_format=json",
           f"--benchmark_out={out}"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out) as f:
        data = json.load(f)
    os.unlink(out)
    times = {}
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate":
            continue
        name = b.get("run_name", b["name"])
        times.setdefault(name, []).append(b["real_time"])
    return times


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--min-time", type=float, default=0.1)
    p.add_argument("--only", default="", help="run only the binaries matching this substring")
    p.add_argument("--out", default="", help="also write the medians and ratios as JSON")
    args = p.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    results = {}
    for binary, bench_filter in CASES:
        if args.only and args.only not in binary:
            continue
        paths = {side: os.path.join(getattr(args, side), "bench", binary)
                 for side in ("before", "after")}
        if not all(os.access(path, os.X_OK) for path in paths.values()):
            print(f"skip {binary}: not built in both trees", file=sys.stderr)
            continue
        samples = {"before": {}, "after": {}}
        for r in range(args.rounds):
            order = ("before", "after") if r % 2 == 0 else ("after", "before")
            for side in order:
                for name, t in run(paths[side], bench_filter, args.reps, args.min_time).items():
                    samples[side].setdefault(name, []).extend(t)
        for name in sorted(set(samples["before"]) & set(samples["after"])):
            b = statistics.median(samples["before"][name])
            a = statistics.median(samples["after"][name])
            results[name] = {"before": b, "after": a, "ratio": b / a}
            print(f"{b / a:6.2f}x  {name}  (before {b:.4g}, after {a:.4g})", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
