#!/usr/bin/python3
"""Summarise ember's benchmark JSON: medians, same-run ratios, target verdicts, plots.

Usage: bench/plot.py <raw-json-dir> <results-dir> <README.md>

Reads every Google Benchmark JSON file in <raw-json-dir> (written by bench/run_suite.sh with
--benchmark_repetitions and aggregates only), keeps the medians, and writes
  <results-dir>/summary.json   the medians per threads/op/impl/case (committed),
  <results-dir>/<op>.png       ember vs floor vs LibTorch per operation, 1 and 2 threads,
and replaces the text between the results markers of <README.md> with the tables.

Benchmark names are op/impl/size/ids/cache[/real_time]. Ratios are speed ratios,
time(baseline) / time(ember), so > 1 means ember is faster; they are taken between benchmarks
of the same binary and run. Verdicts on 1 thread use CPU time (the machine is shared: wall time
includes time the process waited for a core); the 2-thread scaling uses wall time.
"""
import json
import pathlib
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

BEGIN = "<!-- results:begin -->"
END = "<!-- results:end -->"

# (label, op, ember impl, baseline impl, required ratio, case filter)
TARGETS = [
    ("forward >= 0.90 x plain gather (b)", "lookup", "ember_forward", "gather_memcpy", 0.90, ""),
    ("forward >= 1.4 x at::embedding * s", "lookup", "ember_forward", "torch_embedding_scale", 1.4,
     ""),
    ("fused >= 0.90 x hand-fused loop (c)", "fused", "ember_fused", "fused_loop", 0.90, ""),
    ("fused >= 1.3 x ember forward + add_to", "fused", "ember_fused", "ember_unfused", 1.3, ""),
    ("fused >= 2.5 x LibTorch embedding * s + pe", "fused", "ember_fused", "torch_pipeline", 2.5,
     ""),
    ("backward >= 2 x LibTorch sparse + coalesce (gpt2, zipf)", "backward", "ember_backward",
     "torch_sparse_coalesce", 2.0, "gpt2/zipf"),
    ("backward >= 5 x LibTorch dense (gpt2, zipf)", "backward", "ember_backward", "torch_dense",
     5.0, "gpt2/zipf"),
    ("logits (ember::blas) >= 0.90 x cblas_sgemm", "logits", "ember_logits_blas", "cblas_sgemm",
     0.90, ""),
    ("(info) logits with Eigen's own GEMM vs cblas_sgemm", "logits", "ember_logits_eigen",
     "cblas_sgemm", None, ""),
    ("logits_backward (ember::blas) >= 0.90 x cblas_sgemm", "logits_backward",
     "ember_logits_backward_blas", "cblas_sgemm", 0.90, ""),
    ("(info) logits_backward with Eigen's own GEMM vs cblas_sgemm", "logits_backward",
     "ember_logits_backward_eigen", "cblas_sgemm", None, ""),
]

# Per op: the implementations drawn, in order (ember first, then floors, then alternatives).
PLOTS = {
    "lookup": ["ember_forward", "gather_memcpy", "memcpy_contiguous", "eigen_indexed",
               "torch_embedding", "torch_embedding_scale"],
    "fused": ["ember_fused", "fused_loop", "ember_unfused", "torch_pipeline"],
    "backward": ["ember_backward", "slotmap_loop", "stream_floor", "read_floor",
                 "torch_sparse_coalesce", "torch_sparse",
                 "dense_loop", "torch_dense"],
    "logits": ["ember_logits_blas", "ember_logits_eigen", "cblas_sgemm", "gemm_eigen", "gemm_blas",
               "torch_linear"],
    "logits_backward": ["ember_logits_backward_blas", "ember_logits_backward_eigen", "cblas_sgemm", "gemm_blas",
                        "gemm_eigen", "torch_mm"],
    "decode_lookup": ["ember_forward", "gather_memcpy", "torch_embedding"],
    "decode_fused": ["ember_fused", "fused_loop"],
}
# Left out of the plots (kept in the tables): LibTorch's uncoalesced sparse backward only wraps
# grad_out and the ids in a sparse tensor (microseconds), which would flatten every other bar.
PLOT_SKIP = {"torch_sparse"}


def load(raw_dir):
    """Medians as {(threads, binary, op, impl, case): record}."""
    runs = {}
    for path in sorted(pathlib.Path(raw_dir).glob("*.json")):
        data = json.loads(path.read_text())
        threads = int(data["context"].get("threads", "1"))
        binary = path.stem.rsplit("_t", 1)[0]
        for b in data["benchmarks"]:
            if b.get("aggregate_name") != "median":
                continue
            parts = b["run_name"].split("/")
            if parts[-1] == "real_time":
                parts = parts[:-1]
            op, impl, case = parts[0], parts[1], "/".join(parts[2:])
            rec = {"real_ns": b["real_time"], "cpu_ns": b["cpu_time"]}
            for key in ("bytes_per_second", "GFLOP/s", "items_per_second"):
                if key in b:
                    rec[key] = b[key]
            runs[(threads, binary, op, impl, case)] = rec
    return runs


def table(runs, threads, op):
    """{case: {impl: record}} for one op and thread count; a binary tag keeps the two logits
    binaries apart (their shared baselines are renamed impl@binary for the second)."""
    out = {}
    for (t, binary, o, impl, case), rec in runs.items():
        if t != threads or o != op:
            continue
        key = impl
        if binary.endswith("_blas") and not impl.endswith("_blas"):
            key = impl + "@blas"
        out.setdefault(case, {})[key] = rec
    return out


def ratio(cases, ember, base, metric, case_filter=""):
    """Per-case speed ratios time(base) / time(ember); baselines looked up in ember's binary."""
    values = {}
    for case, impls in sorted(cases.items()):
        if case_filter and not case.startswith(case_filter):
            continue
        suffix = "@blas" if ember.endswith("_blas") else ""
        b = impls.get(base + suffix) or (impls.get(base) if not suffix else None)
        e = impls.get(ember)
        if b and e:
            values[case] = b[metric] / e[metric]
    return values


def fmt_time(ns):
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f} us"
    return f"{ns:.0f} ns"


def markdown(runs):
    lines = []
    thread_counts = sorted({k[0] for k in runs})
    lines.append("### Targets (1 thread, medians of 5 repetitions, same-run ratios)\n")
    lines.append("Ratio = time(baseline) / time(ember): above 1, ember is faster. CPU-time ratio "
                 "decides (shared machine); wall-time ratio shown beside it.\n")
    lines.append("| target | median ratio (cpu) | min..max over cases | median ratio (wall) | "
                 "met |")
    lines.append("|---|---|---|---|---|")
    for label, op, ember, base, need, filt in TARGETS:
        cases = table(runs, 1, op)
        cpu = ratio(cases, ember, base, "cpu_ns", filt)
        wall = ratio(cases, ember, base, "real_ns", filt)
        if not cpu:
            lines.append(f"| {label} | n/a | | | not measured |")
            continue
        med = statistics.median(cpu.values())
        lines.append(
            f"| {label} | {med:.2f} | {min(cpu.values()):.2f}..{max(cpu.values()):.2f} | "
            f"{statistics.median(wall.values()):.2f} | "
            f"{'-' if need is None else ('yes' if med >= need else '**no**')} |")

    dec = table(runs, 1, "decode_lookup")
    decf = table(runs, 1, "decode_fused")
    if dec:
        lines.append("\n### Decoding calls (N = 1..8 ids, GPT-2 table, warm, 1 thread)\n")
        lines.append("| N | memcpy rows | ember forward | overhead | hand-fused | ember fused | "
                     "overhead | at::embedding |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for case in sorted(dec, key=lambda c: int(c.split("/")[1][1:])):
            r = dec[case]
            f = decf.get(case, {})
            n = case.split("/")[1][1:]
            row = [n]
            for a, b in ((r, "gather_memcpy"), (r, "ember_forward")):
                row.append(fmt_time(a[b]["cpu_ns"]) if b in a else "")
            row.append(f"{r['ember_forward']['cpu_ns'] - r['gather_memcpy']['cpu_ns']:+.0f} ns")
            if "fused_loop" in f and "ember_fused" in f:
                row += [fmt_time(f["fused_loop"]["cpu_ns"]), fmt_time(f["ember_fused"]["cpu_ns"]),
                        f"{f['ember_fused']['cpu_ns'] - f['fused_loop']['cpu_ns']:+.0f} ns"]
            else:
                row += ["", "", ""]
            row.append(fmt_time(r["torch_embedding"]["cpu_ns"]) if "torch_embedding" in r else "")
            lines.append("| " + " | ".join(row) + " |")

    if 2 in thread_counts:
        lines.append("\n### Thread scaling (wall time, 1 -> 2 threads, median over cases)\n")
        lines.append("| op | impl | speed-up 1 -> 2 threads | min..max |")
        lines.append("|---|---|---|---|")
        for op in ("lookup", "fused", "backward", "logits", "logits_backward"):
            one, two = table(runs, 1, op), table(runs, 2, op)
            for impl in PLOTS[op]:
                for key in (impl, impl + "@blas"):
                    s = [one[c][key]["real_ns"] / two[c][key]["real_ns"] for c in one
                         if key in one[c] and c in two and key in two[c]]
                    if s:
                        lines.append(f"| {op} | {key} | {statistics.median(s):.2f} | "
                                     f"{min(s):.2f}..{max(s):.2f} |")

    for t in thread_counts:
        lines.append(f"\n### Medians, {t} thread(s) (CPU time; wall time in parentheses)\n")
        for op in PLOTS:
            cases = table(runs, t, op)
            if not cases:
                continue
            impls = [i for i in PLOTS[op] + [p + "@blas" for p in PLOTS[op]]
                     if any(i in c for c in cases.values())]
            lines.append(f"**{op}**\n")
            lines.append("| case | " + " | ".join(impls) + " |")
            lines.append("|---|" + "---|" * len(impls))
            for case in sorted(cases):
                cells = []
                for i in impls:
                    r = cases[case].get(i)
                    cells.append(f"{fmt_time(r['cpu_ns'])} ({fmt_time(r['real_ns'])})" if r
                                 else "")
                lines.append(f"| {case} | " + " | ".join(cells) + " |")
            lines.append("")
    return "\n".join(lines)


def plot(runs, results_dir):
    for op, impls in PLOTS.items():
        thread_counts = [t for t in sorted({k[0] for k in runs}) if table(runs, t, op)]
        if not thread_counts:
            continue
        fig, axes = plt.subplots(len(thread_counts), 1, figsize=(11, 3.6 * len(thread_counts)),
                                 squeeze=False)
        gemm = op.startswith("logits")
        for ax, t in zip(axes[:, 0], thread_counts):
            cases = table(runs, t, op)
            names = sorted(cases)
            keys = [i for i in impls + [p + "@blas" for p in impls]
                    if i not in PLOT_SKIP and any(i in cases[c] for c in names)]
            width = 0.8 / max(len(keys), 1)
            for k, key in enumerate(keys):
                xs, ys = [], []
                for x, case in enumerate(names):
                    r = cases[case].get(key)
                    if r:
                        metric = "cpu_ns" if t == 1 else "real_ns"
                        work = (r.get("GFLOP/s", 0) * r["real_ns"]) if gemm else (
                            r.get("bytes_per_second", 0) * r["real_ns"] / 1e9)
                        xs.append(x + k * width)
                        ys.append(work / r[metric] if gemm else work / r[metric])
                ax.bar(xs, ys, width, label=key)
            ax.set_xticks([x + 0.4 - width / 2 for x in range(len(names))])
            ax.set_xticklabels(names, rotation=15, fontsize=8)
            ax.set_ylabel("GFLOP/s" if gemm else "useful GB/s")
            ax.set_title(f"{op}, {t} thread(s) ({'CPU' if t == 1 else 'wall'} time)")
            ax.legend(fontsize=7, ncol=3)
        fig.tight_layout()
        fig.savefig(pathlib.Path(results_dir) / f"{op}.png", dpi=90)
        plt.close(fig)


def main():
    raw_dir, results_dir, readme = sys.argv[1:4]
    runs = load(raw_dir)
    pathlib.Path(results_dir).mkdir(parents=True, exist_ok=True)
    summary = [{"threads": t, "binary": b, "op": o, "impl": i, "case": c, **r}
               for (t, b, o, i, c), r in sorted(runs.items())]
    (pathlib.Path(results_dir) / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    plot(runs, results_dir)
    text = pathlib.Path(readme).read_text()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    pathlib.Path(readme).write_text(text[:start] + "\n" + markdown(runs) + "\n" + text[end:])


if __name__ == "__main__":
    main()
