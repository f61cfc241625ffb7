"""Writes a Diffusion Policy with LeRobot 0.6.1 itself, as `lerobot-train` saves one
(`pretrained_model/`: config.json, model.safetensors, the pre- and post-processors), for a
dataset LeRobot can read: the starting point of a fine-tune from a LeRobot pretrained policy.

Run in LeRobot 0.6.1's environment (`../shared/anchors/setup.sh`):

    python bench/lerobot/write_policy.py --root DATASET --out DIR [--down-dims 64,128,256]

The policy is freshly initialised (seeded) with LeRobot's own classes; the backbone is not
pretrained (no download), and its sampler is DDIM so that its actions are deterministic given
the initial noise (`check_export.py` compares them).
"""

import argparse
from pathlib import Path

import torch

from lerobot.configs.types import FeatureType
from lerobot.datasets.lerobot_dataset import LeRobotDataset
from lerobot.policies.diffusion.configuration_diffusion import DiffusionConfig
from lerobot.policies.diffusion.modeling_diffusion import DiffusionPolicy
from lerobot.policies.factory import make_pre_post_processors
from lerobot.utils.feature_utils import dataset_to_policy_features

parser = argparse.ArgumentParser()
parser.add_argument("--root", required=True)
parser.add_argument("--out", required=True)
parser.add_argument("--down-dims", default="64,128,256")
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

torch.manual_seed(args.seed)
meta = LeRobotDataset(f"local/{Path(args.root).name}", root=args.root).meta
features = dataset_to_policy_features(meta.features)
config = DiffusionConfig(
    input_features={k: f for k, f in features.items() if f.type is not FeatureType.ACTION},
    output_features={k: f for k, f in features.items() if f.type is FeatureType.ACTION},
    down_dims=tuple(int(d) for d in args.down_dims.split(",")),
    pretrained_backbone_weights=None,
    noise_scheduler_type="DDIM",
    num_inference_steps=10,
    horizon=16,
    n_action_steps=8,
    crop_shape=(84, 84),
    device="cpu",
)
policy = DiffusionPolicy(config)
pre, post = make_pre_post_processors(config, dataset_stats=meta.stats)
out = Path(args.out)
policy.save_pretrained(out)
pre.save_pretrained(out)
post.save_pretrained(out)
print(f"wrote {out}: {sum(p.numel() for p in policy.parameters())} parameters, files {sorted(p.name for p in out.iterdir())}")
