#!/usr/bin/env python3
"""Sums the GPU time of one training step's kernels from an Nsight Compute CSV.

`scripts/gpu-run.sh profile` writes ncu-<precision>.csv: the kernels of `bench-fusion train-step
--warmup 1 --steps 1 --profiler-range`, each with its `gpu__time_duration.sum`, profiled from the
timed step's start (ncu's `--profile-from-start off`): the window is that one step, ending with
the update's `adam` launches. A window of more (a profile of several steps) ends each step with
them, and the last step is the kernels after the last Adam launches but one, up to and including
the last ones. Prints the step's kernel count and GPU time, then the time by kernel, largest
first.

    python3 bench/ncu_summary.py ncu-f32.csv [ncu-bf16.csv ...]
"""

import csv
import re
import sys
from collections import defaultdict

UNIT_MS = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0, "second": 1e3}


def kernels(path):
    """(name, milliseconds) for every kernel in launch order."""
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]  # ncu's own log lines start with ==
    rows = []
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        rows.append((int(row["ID"]), row["Kernel Name"], value * UNIT_MS[row["Metric Unit"]]))
    rows.sort()
    return [(name, ms) for _, name, ms in rows]


def last_step(all_kernels):
    """The kernels of the last step, and whether the window holds all of it."""
    adam = [i for i, (name, _) in enumerate(all_kernels) if "adam" in name.lower()]
    groups = []  # (first, last) index of each run of consecutive Adam launches
    for i in adam:
        if groups and groups[-1][1] == i - 1:
            groups[-1] = (groups[-1][0], i)
        else:
            groups.append((i, i))
    if len(groups) >= 2:
        return all_kernels[groups[-2][1] + 1 : groups[-1][1] + 1], True
    if len(groups) == 1 and groups[0][1] == len(all_kernels) - 1:
        return all_kernels, True  # the window is one step, the profiler's range
    if len(groups) == 1:
        return all_kernels[groups[0][1] + 1 :], False
    sys.exit("the window holds no update (no adam launch): it is not a whole step")


def family(name):
    """A kernel's name without its template arguments and parameters."""
    name = name.replace("(anonymous namespace)::", "")
    name = re.sub(r"\(.*", "", name)
    name = re.sub(r"<.*", "", name)
    return name.strip()[:70] or "(unnamed)"


def main():
    for path in sys.argv[1:]:
        step, whole = last_step(kernels(path))
        total = sum(ms for _, ms in step)
        by_family = defaultdict(lambda: [0, 0.0])
        for name, ms in step:
            entry = by_family[family(name)]
            entry[0] += 1
            entry[1] += ms
        what = "the last step" if whole else "the last step's first kernels (the window ends before its update)"
        print(f"{path}: {len(step)} kernels, {total:.2f} ms of GPU time in {what}")
        print("| kernel | launches | ms | share |\n|---|---|---|---|")
        for name, (count, ms) in sorted(by_family.items(), key=lambda kv: -kv[1][1]):
            print(f"| `{name}` | {count} | {ms:.2f} | {100 * ms / total:.1f}% |")
        print()


if __name__ == "__main__":
    main()
