#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Helpers of scripts/fidelity.sh (standard library only).

  fidelity.py measure TRACE.json...     -> "step_ms exposed_ms steps ranks": per-rank medians over
                                           the steps after the first, averaged over the ranks
  fidelity.py throughput TOKENS TRACE... -> "step_ms tokens_per_s gflops_per_s idle_pct": per rank
                                           medians over the steps after the first, averaged over
                                           the ranks; TOKENS = tokens one rank trains per step
  fidelity.py plot TABLE.csv OUT.svg    -> predicted-vs-measured SVG scatter
  fidelity.py table TABLE.csv           -> the table with relative errors and verdicts

Throughput: the IR's FLOPs of a step's compute ops (the trace's "flops" arguments) over the
measured step time; idle_pct is the share of the step in which no op of any stream ran (the
executor's own time: issuing, allocations, events, bookkeeping). "Ran" counts compute ops and
collectives only: a wait op spans the time its stream waits, so it is not work.

Measured step time: per rank and step, the last op end minus the first op start (every stream),
median over the steps after the first (warm-up), mean over the ranks. Exposed communication: per
rank and step, the union of the collective intervals minus the union of the compute intervals
(what the simulator reports as exposed_communication), median over the same steps, mean over the
ranks.
"""
import csv
import json
import statistics
import sys

COLLECTIVES = ("all-gather", "reduce-scatter", "all-reduce")
COMPUTE = ("forward", "backward", "recompute", "grad-copy", "cast", "optimizer-step")


def union(intervals):
    out = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return out


def length(intervals):
    return sum(e - s for s, e in intervals)


def minus(a, b):
    """Total length of union a not covered by union b (both sorted, disjoint)."""
    total = 0.0
    j = 0
    for s, e in a:
        cur = s
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                total += b[k][0] - cur
            cur = max(cur, b[k][1])
            k += 1
        if cur < e:
            total += e - cur
    return total


def measure(paths):
    """Per rank: the median over the steps after the first of the step time and the exposed
    communication; returned as the mean over the ranks found in `paths` (one trace of all ranks,
    or one file per rank from `fsdpsim train --trace 'run-{rank}.json'`)."""
    steps = {}  # (rank, step) -> [(kind, start, end)]
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        events = doc["traceEvents"] if isinstance(doc, dict) else doc
        for ev in events:
            if ev.get("ph") != "X":
                continue
            step = ev.get("args", {}).get("step")
            if step is None:
                continue
            kind = ev["name"].split(" ")[0]
            steps.setdefault((ev.get("pid"), step), []).append((kind, ev["ts"], ev["ts"] + ev["dur"]))
    ranks = sorted({rank for rank, _ in steps})
    step_ms, exposed_ms, counted = [], [], 0
    for rank in ranks:
        mine = sorted(step for r, step in steps if r == rank)
        times, exposed = [], []
        for step in mine[1:] or mine:
            ops = steps[(rank, step)]
            times.append(max(e for _, _, e in ops) - min(s for _, s, _ in ops))
            comm = union([(s, e) for k, s, e in ops if k in COLLECTIVES])
            comp = union([(s, e) for k, s, e in ops if k in COMPUTE])
            exposed.append(minus(comm, comp))
        step_ms.append(statistics.median(times) / 1e3)
        exposed_ms.append(statistics.median(exposed) / 1e3)
        counted = len(times)
    return statistics.mean(step_ms), statistics.mean(exposed_ms), counted, len(ranks)


def throughput(tokens, paths):
    """Per rank medians (steps after the first) of the step time, the IR FLOP rate and the idle
    share; means over the ranks."""
    steps = {}  # (rank, step) -> [(start, end, flops)]
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        events = doc["traceEvents"] if isinstance(doc, dict) else doc
        for ev in events:
            args = ev.get("args", {})
            if ev.get("ph") != "X" or args.get("step") is None:
                continue
            steps.setdefault((ev.get("pid"), args["step"]), []).append(
                (ev["ts"], ev["ts"] + ev["dur"], args.get("flops", 0),
                 ev["name"].split(" ")[0] in COMPUTE + COLLECTIVES))
    ranks = sorted({rank for rank, _ in steps})
    step_ms, gflops, idle = [], [], []
    for rank in ranks:
        mine = sorted(step for r, step in steps if r == rank)
        t, g, i = [], [], []
        for step in mine[1:] or mine:
            ops = steps[(rank, step)]
            span = max(e for _, e, _, _ in ops) - min(s for s, _, _, _ in ops)  # µs
            t.append(span)
            g.append(sum(f for _, _, f, _ in ops) / (span * 1e3))  # FLOP per ns = GFLOP/s
            work = union([(s, e) for s, e, _, w in ops if w])
            i.append(100.0 * (span - length(work)) / span)
        step_ms.append(statistics.median(t) / 1e3)
        gflops.append(statistics.median(g))
        idle.append(statistics.median(i))
    ms = statistics.mean(step_ms)
    return ms, tokens / (ms / 1e3), statistics.mean(gflops), statistics.mean(idle)


def rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def errors(r, which="predicted"):
    ms, ps = float(r["measured_step_ms"]), float(r[f"{which}_step_ms"])
    me, pe = float(r["measured_exposed_ms"]), float(r[f"{which}_exposed_ms"])
    step_err = (ps - ms) / ms
    tol = max(0.25 * me, 0.02 * ms)
    return step_err, pe - me, tol


def table(path):
    data = rows(path)
    kinds = [("predicted", "measured alone (cpu.json)")]
    if data and data[0].get("fitted_step_ms"):
        kinds.append(("fitted", "fitted to one run (cpu-fitted.json)"))
    for which, title in kinds:
        print(f"== {title}")
        print(f"{'config':34} {'meas ms':>9} {'pred ms':>9} {'err':>7}  "
              f"{'exp meas':>8} {'exp pred':>8} {'tol':>6}  step  exposed")
        steps_ok = exposed_ok = 0
        for r in data:
            step_err, exp_err, tol = errors(r, which)
            s_ok, e_ok = abs(step_err) <= 0.15, abs(exp_err) <= tol
            steps_ok += s_ok
            exposed_ok += e_ok
            print(f"{r['config']:34} {float(r['measured_step_ms']):9.1f} "
                  f"{float(r[which + '_step_ms']):9.1f} {100 * step_err:+6.1f}%  "
                  f"{float(r['measured_exposed_ms']):8.1f} {float(r[which + '_exposed_ms']):8.1f} "
                  f"{tol:6.1f}  {'ok  ' if s_ok else 'MISS'}  {'ok' if e_ok else 'MISS'}")
        print(f"{steps_ok} of {len(data)} step times within 15%; {exposed_ok} of {len(data)} "
              f"exposed communication within max(25%, 2% of step)\n")


def plot(path, out):
    data = rows(path)
    pts = [(float(r["measured_step_ms"]), float(r["predicted_step_ms"]), r["config"]) for r in data]
    pts_hi = [float(r.get("fitted_step_ms") or 0) for r in data]
    exp = [(float(r["measured_exposed_ms"]), float(r["predicted_exposed_ms"])) for r in data]
    hi = max([max(m, p) for m, p, _ in pts] + pts_hi + [1.0]) * 1.1
    w, h, pad = 520, 520, 60
    sx = lambda v: pad + (w - 2 * pad) * v / hi
    sy = lambda v: h - pad - (h - 2 * pad) * v / hi
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="13">'
           f'simulator vs CPU backend, 4 ranks (step time and exposed communication, ms)</text>']
    band = [(0, 0), (hi, hi * 1.15), (hi, hi * 0.85)]
    svg.append('<polygon fill="#dde8f5" points="' +
               " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in band) + '"/>')
    svg.append(f'<line x1="{sx(0)}" y1="{sy(0)}" x2="{sx(hi)}" y2="{sy(hi)}" stroke="#888"/>')
    for tick in range(6):
        v = hi * tick / 5
        svg.append(f'<text x="{sx(v):.1f}" y="{h - pad + 16}" text-anchor="middle">{v:.0f}</text>')
        svg.append(f'<text x="{pad - 6}" y="{sy(v) + 4:.1f}" text-anchor="end">{v:.0f}</text>')
    svg.append(f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="black"/>')
    svg.append(f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="black"/>')
    svg.append(f'<text x="{w / 2}" y="{h - 20}" text-anchor="middle">measured (ms)</text>')
    svg.append(f'<text x="18" y="{h / 2}" text-anchor="middle" '
               f'transform="rotate(-90 18 {h / 2})">predicted (ms)</text>')
    for m, p, name in pts:
        svg.append(f'<circle cx="{sx(m):.1f}" cy="{sy(p):.1f}" r="4" fill="#1f77b4">'
                   f'<title>{name}: step measured {m:.1f}, predicted {p:.1f}</title></circle>')
    for m, p in exp:
        svg.append(f'<rect x="{sx(m) - 3:.1f}" y="{sy(p) - 3:.1f}" width="6" height="6" '
                   f'fill="#d62728"/>')
    fitted = [r for r in data if r.get("fitted_step_ms")]
    for r in fitted:
        for key, color in (("step", "#2ca02c"), ("exposed", "#ff7f0e")):
            m, p = float(r[f"measured_{key}_ms"]), float(r[f"fitted_{key}_ms"])
            svg.append(f'<path d="M{sx(m):.1f},{sy(p) - 5:.1f} l4.5,8 h-9 z" fill="{color}">'
                       f'<title>{r["config"]} (fitted): {key} measured {m:.1f}, predicted '
                       f'{p:.1f}</title></path>')
    svg.append(f'<circle cx="{pad + 12}" cy="{pad + 6}" r="4" fill="#1f77b4"/>'
               f'<text x="{pad + 22}" y="{pad + 10}">step time</text>')
    svg.append(f'<rect x="{pad + 9}" y="{pad + 19}" width="6" height="6" fill="#d62728"/>'
               f'<text x="{pad + 22}" y="{pad + 26}">exposed communication</text>')
    svg.append(f'<text x="{pad + 22}" y="{pad + 42}" fill="#5580b0">band: +-15%</text>')
    if fitted:
        svg.append(f'<path d="M{pad + 12},{pad + 49} l4.5,8 h-9 z" fill="#2ca02c"/>'
                   f'<text x="{pad + 22}" y="{pad + 58}">step time, fitted file</text>')
        svg.append(f'<path d="M{pad + 12},{pad + 65} l4.5,8 h-9 z" fill="#ff7f0e"/>'
                   f'<text x="{pad + 22}" y="{pad + 74}">exposed communication, fitted file</text>')
    svg.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "measure":
        step_ms, exposed_ms, n, ranks = measure(sys.argv[2:])
        print(f"{step_ms:.3f} {exposed_ms:.3f} {n} {ranks}")
    elif len(sys.argv) >= 4 and sys.argv[1] == "throughput":
        ms, tps, gf, idle = throughput(float(sys.argv[2]), sys.argv[3:])
        print(f"{ms:.3f} {tps:.1f} {gf:.2f} {idle:.2f}")
    elif len(sys.argv) == 4 and sys.argv[1] == "plot":
        plot(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "table":
        table(sys.argv[2])
    else:
        sys.exit(__doc__)
