#!/usr/bin/env python
"""LeRobot 0.6.1's Diffusion Policy training step on CPU with the tiny configuration our
`bench train-step --tiny` times: the shared anchor script (`../shared/anchors/bench_train.py`)
with more configs: `tiny` (PushT classic recipe, U-Net widths 64/128/256, step embedding 64),
and `tiny_group_norm` and `pusht_classic_group_norm`, the same with GroupNorm in the backbone.
LeRobot 0.6.1 defaults to BatchNorm (`use_group_norm=False`), our classic preset to GroupNorm
(the PushT recipe's): time like against like, `bench train-step --tiny --use-group-norm false`
against `tiny`, or ours as it is against the `_group_norm` configs.

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
bench_train.CONFIGS["tiny_group_norm"] = dict(bench_train.CONFIGS["tiny"], use_group_norm=True)
bench_train.CONFIGS["pusht_classic_group_norm"] = dict(bench_train.CONFIGS["pusht_classic"], use_group_norm=True)
sys.argv = [sys.argv[0], *rest]
bench_train.main()
