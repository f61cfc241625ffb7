#!/usr/bin/env python
"""LeRobot 0.6.1's Diffusion Policy training step on CPU with the tiny configuration our
`bench train-step --tiny` times: the shared anchor script (`../shared/anchors/bench_train.py`)
with one more config, `tiny` (PushT classic recipe, U-Net widths 64/128/256, step embedding 64).

Usage (from a folder holding the anchors' `.venv` and `anchor-data/`):
  .venv/bin/python /path/to/bench/lerobot/train_step_tiny.py --anchors ../shared/anchors \
      --configs tiny --batch-sizes 8 --steps 5 --threads 2 --out anchor-data/train_tiny.json
"""

import argparse
import sys

parser = argparse.ArgumentParser(add_help=False)
parser.add_argument("--anchors", required=True, help="the folder of bench_train.py")
known, rest = parser.parse_known_args()
sys.path.insert(0, known.anchors)

import bench_train  # noqa: E402

bench_train.CONFIGS["tiny"] = dict(
    horizon=16,
    n_action_steps=8,
    crop_shape=(84, 84),
    pretrained_backbone_weights=None,
    down_dims=(64, 128, 256),
    diffusion_step_embed_dim=64,
)
sys.argv = [sys.argv[0], *rest]
bench_train.main()
