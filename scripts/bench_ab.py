#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Compare Google Benchmark binaries by running them alternately.

On a shared machine the speed of the same binary drifts by 20-30% over minutes, so two binaries
timed one after the other can differ by more than the change between them. This script runs each
binary once per round (every benchmark matching FILTER, --benchmark_min_time short), alternating
the binaries round after round, and prints per binary and benchmark the median, minimum and
maximum of a figure over the rounds: the CPU time per iteration (ms), or a counter such as
events/s. Medians of alternating runs see the same drift on both sides.

Examples:
  scripts/bench_ab.py --rounds 20 --counter events/s 'BM_EngineLlama405b' old_bench new_bench
  scripts/bench_ab.py --rounds 5 --ratio 'Padded/1000000$' 'Padded/100000$' \
      'BM_BuildForRowAtomicPadded/(100000|1000000)$' build/bench/bin/layout_builder_bench
"""

import argparse
import json
import re
import statistics
import subprocess
import sys


def run_once(binary, bench_filter, min_time):
    """Returns {benchmark name: entry} from one run of `binary`."""
    cmd = [binary, f"--benchmark_filter={bench_filter}", f"--benchmark_min_time={min_time}",
           "--benchmark_format=json"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"bench_ab: {binary} exited with {done.returncode}: {done.stderr.strip()[:200]}")
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError as err:
        sys.exit(f"bench_ab: {binary} printed no JSON report ({err})")
    return {b["name"]: b for b in report.get("benchmarks", [])}


def figure(entry, counter):
    """The CPU time in ms, or the named counter."""
    if counter is None:
        scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[entry.get("time_unit", "ns")]
        return entry["cpu_time"] * scale
    if counter not in entry:
        sys.exit(f"bench_ab: benchmark {entry['name']} has no counter '{counter}'; "
                 f"it has {sorted(k for k in entry if isinstance(entry[k], (int, float)))}")
    return float(entry[counter])


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Prints one line per binary and benchmark: median, min and max over the rounds.")
    parser.add_argument("filter", help="--benchmark_filter regex")
    parser.add_argument("binaries", nargs="+", help="benchmark executables to compare")
    parser.add_argument("--rounds", type=int, default=10, help="rounds (default 10)")
    parser.add_argument("--min-time", type=float, default=0.2,
                        help="--benchmark_min_time per run, seconds (default 0.2)")
    parser.add_argument("--counter", default=None,
                        help="a user counter to compare (default: CPU time per iteration, ms)")
    parser.add_argument("--ratio", nargs=2, metavar=("NUM", "DEN"), default=None,
                        help="also print, per binary, the median over rounds of the ratio of the "
                             "figures of the benchmarks whose names match the regexes NUM and DEN")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    samples = {b: {} for b in args.binaries}  # binary -> name -> [figure per round]
    ratios = {b: [] for b in args.binaries}
    for _ in range(args.rounds):
        for binary in args.binaries:
            entries = run_once(binary, args.filter, args.min_time)
            if not entries:
                sys.exit(f"bench_ab: no benchmark of {binary} matches '{args.filter}'")
            values = {name: figure(e, args.counter) for name, e in entries.items()}
            for name, value in values.items():
                samples[binary].setdefault(name, []).append(value)
            if args.ratio:
                num = [v for n, v in values.items() if re.search(args.ratio[0], n)]
                den = [v for n, v in values.items() if re.search(args.ratio[1], n)]
                if len(num) != 1 or len(den) != 1 or den[0] == 0:
                    sys.exit(f"bench_ab: --ratio needs exactly one benchmark matching each of "
                             f"'{args.ratio[0]}' and '{args.ratio[1]}' (found {len(num)} and "
                             f"{len(den)})")
                ratios[binary].append(num[0] / den[0])
    what = args.counter or "cpu ms"
    for binary in args.binaries:
        for name, values in samples[binary].items():
            print(f"{binary}  {name}  {what}: median {statistics.median(values):.4g}  "
                  f"min {min(values):.4g}  max {max(values):.4g}  ({len(values)} rounds)")
        if args.ratio:
            r = ratios[binary]
            print(f"{binary}  ratio {args.ratio[0]} / {args.ratio[1]}: median "
                  f"{statistics.median(r):.3g}  min {min(r):.3g}  max {max(r):.3g}  "
                  f"(per round: {' '.join(f'{x:.1f}' for x in r)})")


if __name__ == "__main__":
    main()
