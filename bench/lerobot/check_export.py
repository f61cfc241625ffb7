"""Loads a policy written by `trainer export` in LeRobot itself and checks that it predicts the
actions our trainer predicts for the same observations and the same initial noise.

Run in LeRobot 0.6.1's environment (`../shared/anchors/setup.sh`) on a dataset LeRobot can read,
with a checkpoint trained with a deterministic sampler (`--policy.noise_scheduler_type DDIM`):

    trainer export --checkpoint OUT --out EXPORT
    python bench/lerobot/check_export.py --export EXPORT --checkpoint OUT \
        --root DATASET --trainer target/release/trainer --indices 0,17,40

Prints the largest difference between the two sets of unnormalised action chunks, relative to
the largest action, and exits 1 when it exceeds --tolerance.
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from lerobot.datasets.lerobot_dataset import LeRobotDataset
from lerobot.policies.diffusion.modeling_diffusion import DiffusionPolicy
from lerobot.policies.factory import make_pre_post_processors

parser = argparse.ArgumentParser()
parser.add_argument("--export", required=True)
parser.add_argument("--checkpoint", required=True)
parser.add_argument("--root", required=True)
parser.add_argument("--trainer", required=True)
parser.add_argument("--indices", default="0,17,40")
parser.add_argument("--tolerance", type=float, default=1e-5, help="relative to the largest |action|")
args = parser.parse_args()
indices = [int(i) for i in args.indices.split(",")]

policy = DiffusionPolicy.from_pretrained(args.export, strict=True)
policy.eval()
pre, post = make_pre_post_processors(policy.config, pretrained_path=args.export)
cfg = policy.config
print(f"loaded {args.export}: {sum(p.numel() for p in policy.parameters())} parameters, "
      f"{cfg.noise_scheduler_type} with {policy.diffusion.num_inference_steps} steps")

fps = LeRobotDataset(f"local/{Path(args.root).name}", root=args.root).meta.fps
deltas = {k: [i / fps for i in range(1 - cfg.n_obs_steps, 1)] for k in cfg.input_features}
dataset = LeRobotDataset(f"local/{Path(args.root).name}", root=args.root, delta_timestamps=deltas)
samples = [dataset[i] for i in indices]
batch = {k: torch.stack([s[k] for s in samples]) for k in cfg.input_features}
batch = pre(batch)
images = [k for k in cfg.input_features if k.startswith("observation.image")]
batch["observation.images"] = torch.stack([batch[k] for k in images], dim=-4)

generator = torch.Generator().manual_seed(0)
noise = torch.randn(len(indices), cfg.horizon, cfg.action_feature.shape[0], generator=generator)
with torch.no_grad():
    ours_lerobot = post(policy.diffusion.generate_actions(batch, noise=noise))

with tempfile.TemporaryDirectory() as tmp:
    save_file({"noise": noise.contiguous()}, f"{tmp}/noise.safetensors")
    cmd = [args.trainer, "sample", "--checkpoint", args.checkpoint, "--root", args.root,
           "--indices", args.indices, "--initial-noise", f"{tmp}/noise.safetensors", "--out", f"{tmp}/ours.safetensors"]
    subprocess.run(cmd, check=True)
    ours = load_file(f"{tmp}/ours.safetensors")["action"]

diff = (ours - ours_lerobot).abs().max().item() / ours_lerobot.abs().max().item()
print(f"LeRobot actions[0,:2] {ours_lerobot[0, :2].tolist()}")
print(f"trainer actions[0,:2] {ours[0, :2].tolist()}")
print(f"max |ours - LeRobot| / max |action| over {tuple(ours.shape)} = {diff:.3g} (tolerance {args.tolerance})")
sys.exit(0 if diff <= args.tolerance else 1)
