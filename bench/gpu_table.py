#!/usr/bin/env python3
"""The table a GPU call ends with (`scripts/gpu-run.sh best`): each timed step beside LeRobot's.

Reads the stage's log, whose every line `scripts/gpu-run.sh` prefixed with the epoch time it was
printed at (bash's `$EPOCHREALTIME`), and nvidia-smi's samples of the GPU's utilisation
(`--query-gpu=timestamp,memory.used,utilization.gpu --format=csv -lms 500`). A step starts at a
line `== bench-BUILD, LABEL (...)`; `bench train-step` prints one row a batch size as it ends:
`| device | policy | precision | batch | mean / median ms | samples/s | prepare | forward |
backward | clip | optim | loop samples/s | data wait |`, then `start-up: S ms to the first step,
which took F ms`; at its end it prints its table again (a `| device |` header, then the same
rows), which is skipped. A row's timed steps are the `--steps` steps before it was printed, so
the GPU's busy share is the mean utilisation nvidia-smi sampled over the `steps x median`
milliseconds before the row (nvidia-smi's own utilisation: the share of each sample period in
which a kernel ran; at two samples a second, a few samples a row). A row with the real loop
(`--loop-steps`) ran its loop after its timed steps: its busy share is the loop's, over the
`loop steps x batch / loop samples/s` seconds before it.

    python3 bench/gpu_table.py STEPS_LOG SMI_CSV [--steps N]

LeRobot 0.6.1's step on an H200 (bench/RESULTS.md, third contact, eager f32 and bf16 autocast)
is the reference, a mean step against our mean step (the median beside it); a cell without one
says so.
"""

import argparse
import csv
import re
import statistics
import sys
import time

# LeRobot 0.6.1's mean PushT-classic step on an H200, in ms (bench/RESULTS.md, "Third contact"):
# eager f32 and bf16 autocast.
LEROBOT_MS = {("f32", 64): 36.5, ("f32", 256): 59.5, ("bf16", 64): 37.5, ("bf16", 256): 58.9}

STEP_HEADER = re.compile(r"^== bench-(\S+), (.*?) \(")
ROW = re.compile(r"^\|([^|]*\|){13}\s*$")
START_UP = re.compile(r"^start-up: (\d+) ms to the first step, which took (\d+) ms")


def parse_log(lines):
    """The timed rows of a stage's log: dicts with the step's build and label, the row's fields,
    its start-up line and the epoch time it was printed at."""
    rows, build, label, repeated = [], None, None, False
    for raw in lines:
        stamp, _, line = raw.rstrip("\n").partition(" ")
        try:
            at = float(stamp)
        except ValueError:
            at, line = None, raw.rstrip("\n")
        header = STEP_HEADER.match(line)
        if header:
            build, label, repeated = header.group(1), header.group(2), False
            continue
        if ROW.match(line):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells[0] == "device":
                repeated = True  # the step's closing table repeats the rows printed as they ended
            if repeated or not cells[3].isdigit():
                continue
            mean, _, median = cells[4].partition("/")
            rows.append({
                "build": build, "label": label, "device": cells[0], "policy": cells[1],
                "precision": cells[2], "batch": int(cells[3]), "mean_ms": float(mean),
                "median_ms": float(median), "samples_per_s": float(cells[5]),
                "loop": cells[11], "wait": cells[12], "at": at, "setup_ms": None, "first_step_ms": None,
            })
            continue
        start_up = START_UP.match(line)
        if start_up and rows and rows[-1]["setup_ms"] is None:
            rows[-1]["setup_ms"], rows[-1]["first_step_ms"] = int(start_up.group(1)), int(start_up.group(2))
    return rows


def parse_smi(lines):
    """nvidia-smi's samples as (epoch seconds, utilisation %), in this machine's local time."""
    samples = []
    for record in csv.reader(lines):
        if len(record) < 3 or not record[2].strip().rstrip("%").strip().isdigit():
            continue
        stamp = record[0].strip()
        whole, _, fraction = stamp.partition(".")
        try:
            seconds = time.mktime(time.strptime(whole, "%Y/%m/%d %H:%M:%S"))
        except ValueError:
            continue
        samples.append((seconds + float("0." + (fraction or "0")), int(record[2].strip().rstrip("%").strip())))
    return samples


def busy_share(row, samples, steps, loop_steps):
    """The mean utilisation over the row's timed steps (a real-loop row's: over its loop), or
    None where no sample falls in them."""
    if row["at"] is None:
        return None
    try:
        start = row["at"] - loop_steps * row["batch"] / float(row["loop"])
    except ValueError:
        start = row["at"] - steps * row["median_ms"] / 1000.0
    inside = [u for t, u in samples if start <= t <= row["at"]]
    return statistics.mean(inside) if inside else None


def table(rows, samples, steps, loop_steps=20):
    """The closing table, one line a timed row, as Markdown."""
    out = [
        "| build | step | precision | batch | median ms | mean ms | LeRobot ms | speed vs LeRobot | GPU busy | "
        "start-up s (first step ms) | real loop samples/s | data wait |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lerobot = LEROBOT_MS.get((r["precision"], r["batch"]))
        ratio = f"{lerobot / r['mean_ms']:.2f}x" if lerobot else "no reference"
        busy = busy_share(r, samples, steps, loop_steps)
        busy = f"{busy:.0f}%" if busy is not None else "-"
        start = f"{r['setup_ms'] / 1000:.0f} ({r['first_step_ms']})" if r["setup_ms"] is not None else "-"
        out.append(
            f"| {r['build']} | {r['label']} | {r['precision']} | {r['batch']} | {r['median_ms']:.1f} | "
            f"{r['mean_ms']:.1f} | {lerobot if lerobot else '-'} | {ratio} | {busy} | {start} | {r['loop']} | "
            f"{r['wait']} |"
        )
    if not rows:
        out.append("| (no step finished) |||||||||||")
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log")
    parser.add_argument("smi")
    parser.add_argument("--steps", type=int, default=30, help="the timed steps of each row (train-step's --steps)")
    parser.add_argument("--loop-steps", type=int, default=20, help="the real loop's steps (train-step's --loop-steps)")
    args = parser.parse_args()
    with open(args.log, errors="replace") as f:
        rows = parse_log(f)
    try:
        with open(args.smi, errors="replace") as f:
            samples = parse_smi(f)
    except OSError:
        samples = []
    print(table(rows, samples, args.steps, args.loop_steps))


if __name__ == "__main__":
    sys.exit(main())
