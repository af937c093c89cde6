#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Predicts every run of a published-runs file with `fsdpsim simulate` and compares.

usage: scripts/validate.py [--fsdpsim BIN] [--runs RUNS.json] [--svg OUT.svg] [--json OUT.json]
                           [--md] [--only ID,ID]

RUNS.json has the format of shared/data/published-runs/runs.json (docs/validation.md): one
object per run with its model, hardware, GPUs, mesh strategy, sequence length, micro-batch size,
accumulation, activation checkpointing, compile, precision, framework, reshard-after-forward and
the measured tokens/s/GPU and peak memory. A model that is not a preset is a file relative to
RUNS.json's directory. Each run becomes one `fsdpsim simulate ... --format json` command line
(printed with --verbose); the predicted tokens/s/GPU is mbs x seq x ga / step time and the
predicted memory is the peak of the kind the run reports (reserved or active), largest over rank
classes. A run whose settings the binary cannot express (a flag its `simulate --help` lacks) is
listed as such, never silently approximated.

Prints a table (text, or Markdown with --md) and the median and max absolute relative errors;
--svg writes a scatter plot of predicted vs measured tokens/s/GPU (log axes, one point per run);
--json writes every prediction. Exit 0 when every run was predicted, 1 when a simulation failed,
2 on bad arguments or input.
"""

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys

GIB = float(1 << 30)

# Fields every run must have (the README of shared/data/published-runs), with their types.
REQUIRED = {
    "id": str, "model": str, "hw": str, "gpus": int, "strategy": str, "seq": int, "mbs": int,
    "ga": int, "ac": str, "compile": bool, "compute": str, "fp8_ag": bool, "param_gather": str,
    "reduce": str, "framework": str, "raf": str, "tps": (int, float),
}


def fail(msg):
    print(f"validate: {msg}", file=sys.stderr)
    sys.exit(2)


def load_runs(path):
    try:
        with open(path, encoding="utf-8") as f:
            runs = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")
    if not isinstance(runs, list) or not runs:
        fail(f"{path}: expected a non-empty JSON array of runs")
    for i, run in enumerate(runs):
        if not isinstance(run, dict):
            fail(f"{path}: run {i}: expected an object, got {type(run).__name__}")
        for field, kind in REQUIRED.items():
            if field not in run:
                fail(f"{path}: run {run.get('id', i)}: missing field '{field}'")
            if not isinstance(run[field], kind) or (kind is int and isinstance(run[field], bool)):
                fail(f"{path}: run {run.get('id', i)}: field '{field}' is {run[field]!r}; "
                     f"expected {kind}")
        if run["tps"] <= 0 or run["gpus"] < 1 or run["seq"] < 1 or run["mbs"] < 1 or run["ga"] < 1:
            fail(f"{path}: run {run['id']}: tps, gpus, seq, mbs and ga must be positive")
        mem = run.get("mem_gib")
        if mem is not None and (not isinstance(mem, (int, float)) or mem <= 0):
            fail(f"{path}: run {run['id']}: mem_gib is {mem!r}; expected a positive number or null")
        if mem is not None and run.get("mem_kind") not in ("reserved", "active"):
            fail(f"{path}: run {run['id']}: mem_kind is {run.get('mem_kind')!r}; "
                 "expected reserved or active")
    return runs


def simulate_flags(binary):
    """The long options `fsdpsim simulate --help` lists."""
    out = subprocess.run([binary, "simulate", "--help"], capture_output=True, text=True,
                         timeout=60)
    flags = set()
    text = out.stdout + out.stderr
    for token in re.findall(r"--[a-z0-9-]+", text):
        flags.add(token)
    if "selective-op" in text:
        flags.add("selective-op")
    if "full-all-units" in text:  # `full` is the blocks only since that name exists
        flags.add("full-all-units")
    return flags


def command_for(run, runs_dir, flags):
    """(argv, missing flags) of the simulate call that expresses `run`."""
    model = run["model"]
    if "/" in model or model.endswith(".json"):
        model = os.path.join(runs_dir, model)
    argv = ["simulate", "--model", model, "--hardware", run["hw"], "--seq-len", str(run["seq"]),
            "--micro-batch-size", str(run["mbs"]), "--microbatches", str(run["ga"]),
            "--format", "json"]
    if run["strategy"] != "zero3":
        fail(f"run {run['id']}: strategy '{run['strategy']}' is not handled; expected zero3")
    argv += ["--mesh", f"dp={run['gpus']}", "--strategy", "zero3"]
    missing = []

    def want(flag, *values):
        if flag in flags:
            argv.extend([flag, *values])
        else:
            missing.append(flag + (" " + " ".join(values) if values else ""))

    if run["ac"] == "full":
        # A framework's full activation checkpointing wraps the transformer blocks only
        # (torchtitan's apply_ac walks model.layers; Megatron's full recompute, llm-foundry's and
        # Hugging Face's checkpointing wrap the decoder layers): fsdpsim's `full` (docs/models.md,
        # "Activation checkpointing modes"). Binaries from before `full-all-units` existed
        # recomputed every unit under `full`; selective-layer:1 is the blocks there.
        if "full-all-units" in flags:
            argv += ["--recompute", "full"]
        elif "selective-op" in flags:
            argv += ["--recompute", "selective-layer:1"]
        else:
            argv.append("--recompute")  # before the modes: a bare --recompute, every unit
    elif run["ac"] != "none":
        if "selective-op" in flags:  # the help text names the modes when they exist
            argv += ["--recompute", run["ac"]]
        else:
            missing.append("--recompute " + run["ac"])
    if run["compile"]:
        want("--compile")
    if run["compute"] != "bf16":
        want("--compute-dtype", run["compute"])
    if run["fp8_ag"]:
        want("--fp8-all-gather")
    # Defaults of the simulator are Megatron-FSDP's; say every setting that differs.
    if run["param_gather"] != "bf16":
        want("--param-dtype", run["param_gather"])
    if run["reduce"] != "bf16":
        want("--reduce-dtype", run["reduce"])
    if run["framework"] != "megatron-fsdp":
        want("--framework", run["framework"])
        if "--kernels" in flags:  # PyTorch's kernels (the framework's own choice, said twice)
            argv += ["--kernels", "torch"]
    if run["raf"] != "all":
        want("--reshard-after-forward", run["raf"])
    return argv, missing


def predict(binary, run, argv):
    proc = subprocess.run([binary, *argv], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:]}
    doc = json.loads(proc.stdout)
    step_ms = doc["step_time_ms"]
    tokens = run["mbs"] * run["seq"] * run["ga"]
    out = {"step_ms": step_ms, "tps": tokens / (step_ms / 1000.0)}
    classes = doc["classes"]
    out["reserved_gib"] = max(c["memory"]["peak_reserved_bytes"] for c in classes) / GIB
    out["active_gib"] = max(c["memory"]["peak_bytes"] for c in classes) / GIB
    out["exposed_ms"] = max(c["exposed_communication_ps"] for c in classes) / 1e9
    return out


def rel(pred, meas):
    return (pred - meas) / meas


def scatter_svg(rows, path):
    """Predicted vs measured tokens/s/GPU on log axes, the y = x line and +-20% bands."""
    pts = [(r["run"]["tps"], r["pred"]["tps"], r["run"]["id"]) for r in rows
           if "tps" in r.get("pred", {})]
    if not pts:
        return
    lo = min(min(a, b) for a, b, _ in pts) / 1.5
    hi = max(max(a, b) for a, b, _ in pts) * 1.5
    size, pad = 520, 60

    def pos(v):
        return pad + (math.log(v) - math.log(lo)) / (math.log(hi) - math.log(lo)) * (size - 2 * pad)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{size}" height="{size}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{size}" height="{size}" fill="white"/>',
           f'<text x="{size / 2}" y="20" text-anchor="middle" font-size="13">'
           'tokens/s/GPU: predicted vs published</text>']
    for f, dash in ((1.0, ""), (1.2, ' stroke-dasharray="4 3"'), (1 / 1.2, ' stroke-dasharray="4 3"')):
        out.append(f'<line x1="{pos(lo):.1f}" y1="{size - pos(lo * f):.1f}" x2="{pos(hi / f if f > 1 else hi):.1f}" '
                   f'y2="{size - pos(min(hi, hi * f) if f < 1 else hi):.1f}" stroke="#888"{dash}/>')
    for tick in (100, 300, 1000, 3000, 10000, 30000):
        if lo <= tick <= hi:
            p = pos(tick)
            out.append(f'<text x="{p:.1f}" y="{size - pad + 16}" text-anchor="middle">{tick}</text>')
            out.append(f'<text x="{pad - 6}" y="{size - p + 4:.1f}" text-anchor="end">{tick}</text>')
    out.append(f'<text x="{size / 2}" y="{size - 12}" text-anchor="middle">published</text>')
    out.append(f'<text x="14" y="{size / 2}" text-anchor="middle" '
               f'transform="rotate(-90 14 {size / 2})">predicted</text>')
    for meas, pred, name in pts:
        x, y = pos(meas), size - pos(pred)
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="#1f77b4">'
                   f'<title>{name}: published {meas:.0f}, predicted {pred:.0f}</title></circle>')
        out.append(f'<text x="{x + 6:.1f}" y="{y - 4:.1f}">{name}</text>')
    out.append("</svg>")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fsdpsim", default=os.path.join(root, "build/release/bin/fsdpsim"))
    ap.add_argument("--runs", default=os.path.join(root, "../shared/data/published-runs/runs.json"))
    ap.add_argument("--svg")
    ap.add_argument("--json")
    ap.add_argument("--md", action="store_true", help="print the table as Markdown")
    ap.add_argument("--only", help="comma-separated run ids")
    ap.add_argument("--verbose", action="store_true", help="print each command line")
    args = ap.parse_args()
    if not os.access(args.fsdpsim, os.X_OK):
        fail(f"--fsdpsim {args.fsdpsim}: not an executable (build it: cmake --preset release && "
             "cmake --build build/release --target fsdpsim)")
    runs = load_runs(args.runs)
    if args.only:
        keep = set(args.only.split(","))
        unknown = keep - {r["id"] for r in runs}
        if unknown:
            fail(f"--only: no run {', '.join(sorted(unknown))} in {args.runs}")
        runs = [r for r in runs if r["id"] in keep]
    flags = simulate_flags(args.fsdpsim)
    runs_dir = os.path.dirname(os.path.abspath(args.runs))
    rows = []
    for run in runs:
        argv, missing = command_for(run, runs_dir, flags)
        if args.verbose:
            print("fsdpsim " + " ".join(argv), file=sys.stderr)
        row = {"run": run, "argv": argv, "missing": missing}
        row["pred"] = predict(args.fsdpsim, run, argv)
        rows.append(row)

    tps_err, mem_err = [], []
    sep = " | " if args.md else "  "
    header = ["run", "model", "hw", "gpus", "published tok/s", "predicted", "error",
              "published GiB", "predicted", "error", "not expressed"]
    lines = [header]
    failed = False
    for row in rows:
        run, pred = row["run"], row["pred"]
        if "error" in pred:
            failed = True
            lines.append([run["id"], run["model"], run["hw"], str(run["gpus"]), f"{run['tps']:g}",
                          "failed: " + " ".join(pred["error"]), "", "", "", "", ""])
            continue
        e = rel(pred["tps"], run["tps"])
        if not row["missing"]:
            tps_err.append(abs(e))
        mem_cells = ["", "", ""]
        if run.get("mem_gib") is not None:
            p = pred["reserved_gib"] if run["mem_kind"] == "reserved" else pred["active_gib"]
            me = rel(p, run["mem_gib"])
            if not row["missing"]:
                mem_err.append(abs(me))
            mem_cells = [f"{run['mem_gib']:.2f} {run['mem_kind']}", f"{p:.2f}", f"{me:+.1%}"]
        lines.append([run["id"], os.path.basename(run["model"]), run["hw"], str(run["gpus"]),
                      f"{run['tps']:g}", f"{pred['tps']:.0f}", f"{e:+.1%}", *mem_cells,
                      ", ".join(row["missing"])])
    if args.md:
        print("| " + " | ".join(lines[0]) + " |")
        print("|" + "---|" * len(lines[0]))
        for line in lines[1:]:
            print("| " + " | ".join(line) + " |")
    else:
        widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
        for line in lines:
            print(sep.join(c.ljust(w) for c, w in zip(line, widths)).rstrip())
    expressed = len(tps_err)
    print(f"\n{expressed} of {len(rows)} runs expressed fully", end="")
    if tps_err:
        print(f"; tokens/s/GPU |error| median {statistics.median(tps_err):.1%}, "
              f"max {max(tps_err):.1%}", end="")
    if mem_err:
        print(f"; peak memory |error| median {statistics.median(mem_err):.1%}, "
              f"max {max(mem_err):.1%} ({len(mem_err)} runs)", end="")
    print()
    if args.svg:
        scatter_svg(rows, args.svg)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump([{"id": r["run"]["id"], "command": "fsdpsim " + " ".join(r["argv"]),
                        "not_expressed": r["missing"], **r["pred"]} for r in rows], f, indent=2)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
