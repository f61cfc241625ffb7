"""LeRobot 0.6.1's training loop, as lerobot_train.py builds it (without accelerate), shared by
the scripts beside this one: the policy, its pre-processor, optimizer and scheduler presets, the
`DataLoader` over `LeRobotDataset` with `EpisodeAwareSampler`, and one update step.
"""

from types import SimpleNamespace
from pathlib import Path

import torch

# The tiny Diffusion Policy `bench train-step --tiny` times: PushT's classic recipe (horizon 16,
# 8 action steps, 2 observation steps, 84x84 random crop, ResNet-18 from scratch with GroupNorm),
# U-Net widths 64/128/256, step embedding 64.
TINY = dict(
    horizon=16,
    n_action_steps=8,
    n_obs_steps=2,
    crop_shape=(84, 84),
    pretrained_backbone_weights=None,
    use_group_norm=True,
    down_dims=(64, 128, 256),
    diffusion_step_embed_dim=64,
)


def setup(root: Path, seed: int, steps: int, policy: dict) -> SimpleNamespace:
    """`set_seed`, `make_policy`, `make_pre_post_processors` and the optimizer and scheduler
    presets for a `steps`-long run of the Diffusion Policy with `policy`'s settings."""
    from lerobot.datasets.factory import resolve_delta_timestamps
    from lerobot.datasets.lerobot_dataset import LeRobotDatasetMetadata
    from lerobot.policies import make_policy, make_pre_post_processors
    from lerobot.policies.diffusion.configuration_diffusion import DiffusionConfig
    from lerobot.utils.random_utils import set_seed

    set_seed(seed)
    meta = LeRobotDatasetMetadata("local/run", root=root)
    cfg = DiffusionConfig(device="cpu", **policy)
    model = make_policy(cfg, ds_meta=meta)
    preprocessor, _ = make_pre_post_processors(cfg, dataset_stats=meta.stats)
    optimizer = cfg.get_optimizer_preset().build(model.get_optim_params())
    return SimpleNamespace(
        root=root,
        seed=seed,
        cfg=cfg,
        meta=meta,
        policy=model,
        preprocessor=preprocessor,
        optimizer=optimizer,
        clip=cfg.get_optimizer_preset().grad_clip_norm,
        scheduler=cfg.get_scheduler_preset().build(optimizer, steps),
        delta_timestamps=resolve_delta_timestamps(cfg, meta),
    )


def dataloader(run: SimpleNamespace, batch_size: int, workers: int) -> torch.utils.data.DataLoader:
    """lerobot-train's `DataLoader`: `LeRobotDataset` sampled by `EpisodeAwareSampler`."""
    from lerobot.datasets import EpisodeAwareSampler
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    dataset = LeRobotDataset(run.meta.repo_id, root=run.root, delta_timestamps=run.delta_timestamps)
    sampler = EpisodeAwareSampler(
        dataset.meta.episodes["dataset_from_index"],
        dataset.meta.episodes["dataset_to_index"],
        episode_indices_to_use=dataset.episodes,
        drop_n_last_frames=run.cfg.drop_n_last_frames,
        shuffle=True,
        seed=run.seed,
        absolute_to_relative_idx=dataset.absolute_to_relative_idx,
    )
    return torch.utils.data.DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        num_workers=workers,
        drop_last=False,
        prefetch_factor=2 if workers > 0 else None,
    )


def update(run: SimpleNamespace, batch: dict) -> float:
    """One step: preprocessor -> forward -> backward -> clip_grad_norm_ -> optimizer step ->
    zero_grad -> scheduler step; the loss."""
    loss, _ = run.policy.forward(run.preprocessor(batch))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(run.policy.parameters(), run.clip, error_if_nonfinite=False)
    run.optimizer.step()
    run.optimizer.zero_grad()
    run.scheduler.step()
    return float(loss.item())


def endless(loader):
    """A loader's batches, epoch after epoch."""
    while True:
        yield from loader
