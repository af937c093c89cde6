#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Fits the one per-GPU-family constant of the per-op compute model: gemm_permille.

usage: scripts/fit_compute.py [--fsdpsim BIN] [--runs RUNS.json] [--family NAME ...]

Every other figure of a hardware preset's compute profile is a datasheet value or a public
measurement (docs/hardware.md). The achieved fraction of peak on large GEMMs in a real training
step is not published per GPU, so it is fitted, once per GPU family, on the runs of that family
in RUNS.json (the visible published runs, shared/data/published-runs/runs.json): the value that
minimises the mean squared log error of the predicted tokens/s/GPU over the family's runs that
the simulator expresses fully. Power-limited parts are their own family (h100-96gb runs at 500 W
and sustains a lower clock than the 700 W h100). The fit never sees memory.

Prints, per family, the fitted gemm_permille, the runs it used and their errors at the fit; the
values go into core/hardware/hardware_presets.cc (kA100GemmPermille, ...) by hand, with the date
of the fit. Deterministic: a golden-section search over [300, 1000] to 1 permille.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import validate  # noqa: E402

# The presets each family's constant applies to, and the preset whose runs fit it.
FAMILIES = {"a100": ["a100", "a100-40gb"], "h100": ["h100", "h200"], "h100-96gb": ["h100-96gb"]}
# Power-limited families: their attention rates are the h100's measured ones scaled by
# gemm_permille / h100's gemm_permille (hopper_profile in core/hardware/hardware_presets.cc), so
# they move with the constant being fitted. Every other family's attention rates are measured
# figures and stay. A power-limited family is fitted after the h100 constant is in the binary
# (the order of FAMILIES; run the script again after setting it: the result is a fixed point).
SCALES_ATTENTION = {"h100-96gb"}


def preset_json(binary, name):
    out = subprocess.run([binary, "hardware", "--show", name, "--format", "json"],
                         capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


def family_runs(runs, family):
    return [r for r in runs if r["hw"] in FAMILIES[family]]


def loss(binary, runs, runs_dir, flags, hw_docs, permille, tmp):
    """Mean squared log error of tokens/s over `runs` at `permille`, and the per-run errors."""
    paths = {}
    for name, doc in hw_docs.items():
        d = json.loads(json.dumps(doc))
        base = d["compute_profile"]["gemm_permille"]
        p = d["compute_profile"]
        if name in SCALES_ATTENTION:
            # Attention on a power-limited part scales with the clock as the GEMMs do (the
            # presets' hopper_profile does the same).
            for key in ("attention_forward_flops", "attention_backward_flops",
                        "cudnn_attention_forward_flops", "cudnn_attention_backward_flops"):
                p[key] = int(p[key] * permille / base)
        p["gemm_permille"] = permille
        path = os.path.join(tmp, f"{name}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(d, f)
        paths[name] = path
    errs = []
    for run in runs:
        argv, missing = validate.command_for(run, runs_dir, flags)
        if missing:
            continue
        argv[argv.index("--hardware") + 1] = paths[run["hw"]]
        pred = validate.predict(binary, run, argv)
        if "error" in pred:
            raise SystemExit(f"fit_compute: run {run['id']} failed: {pred['error']}")
        errs.append((run["id"], math.log(pred["tps"] / run["tps"])))
    if not errs:
        return None, []
    return sum(e * e for _, e in errs) / len(errs), errs


def fit(binary, runs, runs_dir, flags, hw_docs):
    with tempfile.TemporaryDirectory() as tmp:
        memo = {}

        def f(x):
            if x not in memo:
                memo[x] = loss(binary, runs, runs_dir, flags, hw_docs, x, tmp)
            return memo[x][0]

        lo, hi = 300, 1000
        if f(lo) is None:
            return None, []
        g = (math.sqrt(5) - 1) / 2
        a, b = lo, hi
        c, d = round(b - g * (b - a)), round(a + g * (b - a))
        while b - a > 2:
            if f(c) <= f(d):
                b, d = d, c
                c = round(b - g * (b - a))
            else:
                a, c = c, d
                d = round(a + g * (b - a))
            if c >= d:
                c, d = (a + b) // 2, (a + b) // 2 + 1
        best = min(range(a, b + 1), key=f)
        return best, memo[best][1]


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fsdpsim", default=os.path.join(root, "build/release/bin/fsdpsim"))
    ap.add_argument("--runs", default=os.path.join(root, "../shared/data/published-runs/runs.json"))
    ap.add_argument("--family", action="append", choices=sorted(FAMILIES))
    args = ap.parse_args()
    runs = validate.load_runs(args.runs)
    flags = validate.simulate_flags(args.fsdpsim)
    runs_dir = os.path.dirname(os.path.abspath(args.runs))
    for family in args.family or sorted(FAMILIES):
        chosen = family_runs(runs, family)
        hw_docs = {name: preset_json(args.fsdpsim, name) for name in {r["hw"] for r in chosen}}
        if not chosen:
            print(f"{family}: no run to fit on")
            continue
        best, errs = fit(args.fsdpsim, chosen, runs_dir, flags, hw_docs)
        if best is None:
            print(f"{family}: no fully expressed run to fit on")
            continue
        detail = ", ".join(f"{i} {math.exp(e) - 1:+.1%}" for i, e in errs)
        print(f"{family}: gemm_permille {best} from {len(errs)} runs ({detail})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
