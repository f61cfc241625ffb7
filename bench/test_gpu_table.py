#!/usr/bin/env python3
"""Tests of bench/gpu_table.py on a log and nvidia-smi samples written as a GPU call writes them."""

import os
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_table  # noqa: E402

T0 = time.mktime(time.strptime("2026/11/30 10:00:00", "%Y/%m/%d %H:%M:%S"))

LOG = f"""\
{T0:.6f} == bench-fusion, predicted fastest: cuDNN with its graph API, 1-D as cuBLAS, f32 (10:00:00, at most 150 s)
{T0 + 1:.6f} 2026-11-30T10:00:01Z  INFO kernels: something logged | with a bar
{T0 + 40:.6f} | cuda | classic | f32 | 64 | 31 / 30 | 2133.3 | 1 | 10 | 15 | 2 | 2 | - | - |
{T0 + 40.1:.6f} start-up: 35000 ms to the first step, which took 9000 ms
{T0 + 60:.6f} | cuda | classic | f32 | 256 | 62 / 60 | 4266.7 | 2 | 20 | 30 | 4 | 4 | 3900.0 | 1.5% |
{T0 + 60.1:.6f} start-up: 2000 ms to the first step, which took 300 ms
{T0 + 60.2:.6f} | device | policy | precision | batch | step ms (mean / median) | samples/s | prepare | forward | backward | clip | optim | real loop samples/s | data wait |
{T0 + 60.2:.6f} |---|---|---|---|---|---|---|---|---|---|---|---|---|
{T0 + 60.2:.6f} | cuda | classic | f32 | 64 | 31 / 30 | 2133.3 | 1 | 10 | 15 | 2 | 2 | - | - |
{T0 + 60.2:.6f} | cuda | classic | f32 | 256 | 62 / 60 | 4266.7 | 2 | 20 | 30 | 4 | 4 | 3900.0 | 1.5% |
{T0 + 61:.6f} == bench-fusion, today's default, bf16 (10:01:01, at most 90 s)
{T0 + 80:.6f} | cuda | classic | bf16 | 128 | 50 / 50 | 2560.0 | 1 | 10 | 15 | 2 | 2 | - | - |
"""

SMI = """\
timestamp, memory.used [MiB], utilization.gpu [%]
2026/11/30 09:59:59.500, 1000 MiB, 0 %
2026/11/30 10:00:39.500, 9000 MiB, 80 %
2026/11/30 10:00:39.900, 9000 MiB, 90 %
2026/11/30 10:00:58.500, 9000 MiB, 100 %
2026/11/30 10:00:59.500, 9000 MiB, 60 %
"""


class GpuTable(unittest.TestCase):
    def test_rows_with_their_start_up_and_step(self):
        rows = gpu_table.parse_log(LOG.splitlines(True))
        self.assertEqual([(r["precision"], r["batch"], r["median_ms"]) for r in rows],
                         [("f32", 64, 30.0), ("f32", 256, 60.0), ("bf16", 128, 50.0)])
        self.assertEqual(rows[0]["label"], "predicted fastest: cuDNN with its graph API, 1-D as cuBLAS, f32")
        self.assertEqual((rows[0]["setup_ms"], rows[0]["first_step_ms"]), (35000, 9000))
        self.assertEqual(rows[1]["wait"], "1.5%")
        self.assertIsNone(rows[2]["setup_ms"])

    def test_busy_share_over_the_timed_steps_only(self):
        rows = gpu_table.parse_log(LOG.splitlines(True))
        samples = gpu_table.parse_smi(SMI.splitlines(True))
        self.assertEqual(len(samples), 5)
        # 30 steps of 30 ms end at T0 + 40: the window [T0 + 39.1, T0 + 40] holds the 80 and 90.
        self.assertAlmostEqual(gpu_table.busy_share(rows[0], samples, 30, 20), 85.0)
        # The real loop's row, over its loop, not its timed steps: 20 loop steps of 256 samples at
        # 3,900 a second end at T0 + 60, so [T0 + 58.69, T0 + 60] holds the 60 alone; 40 reach
        # back to T0 + 57.37 (the 100 too); 2 hold no sample.
        self.assertAlmostEqual(gpu_table.busy_share(rows[1], samples, 30, 20), 60.0)
        self.assertAlmostEqual(gpu_table.busy_share(rows[1], samples, 30, 40), 80.0)
        self.assertIsNone(gpu_table.busy_share(rows[1], samples, 30, 2))
        self.assertIsNone(gpu_table.busy_share(rows[2], samples, 30, 20))

    def test_the_table_compares_with_lerobot_where_it_was_measured(self):
        rows = gpu_table.parse_log(LOG.splitlines(True))
        samples = gpu_table.parse_smi(SMI.splitlines(True))
        lines = gpu_table.table(rows, samples, 30).splitlines()
        self.assertEqual(len(lines), 2 + 3)
        self.assertIn("| 36.5 | 1.18x | 85% | 35 (9000) | - | - |", lines[2])
        self.assertIn("| 59.5 | 0.96x | 60% |", lines[3])
        self.assertIn("| no reference | - |", lines[4])

    def test_a_call_cut_short_still_ends_with_a_table(self):
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "steps.txt")
            with open(log, "w") as f:
                f.write(f"{T0:.6f} == bench-fusion, predicted fastest, f32 (10:00:00, at most 150 s)\n")
            out = subprocess.run([sys.executable, gpu_table.__file__, log, os.path.join(tmp, "missing.csv")],
                                 capture_output=True, text=True, check=True).stdout
        self.assertIn("(no step finished)", out)


if __name__ == "__main__":
    unittest.main()
