#!/usr/bin/env python
"""Does our trainer train like LeRobot? Both train the same configuration from their own seeds and
the mean loss over the last steps is compared with the spread between LeRobot's seeds.

The configuration is the tiny Diffusion Policy `bench train-step --tiny` times: PushT's classic
recipe (horizon 16, 8 action steps, 2 observation steps, 84x84 random crop, ResNet-18 from
scratch with GroupNorm), U-Net widths 64/128/256, step embedding 64, Adam at lr 1e-4 with 500
warm-up steps of the cosine schedule over `--steps`, gradients clipped at 10, no EMA.

LeRobot's side is lerobot-train's own loop (lerobot_train.py of 0.6.1, without accelerate):
`set_seed`, `make_policy`, `make_pre_post_processors`, the policy's optimizer and scheduler
presets, `EpisodeAwareSampler(drop_n_last_frames=7, shuffle=True, seed)`, then per step
preprocessor -> forward -> backward -> clip_grad_norm_ -> Adam -> zero_grad -> scheduler. Our side
is `trainer` with the same keys (`--log_freq 1`; losses read from its metrics.csv).

Usage (from a folder with LeRobot 0.6.1's venv; the dataset from `datasets synth --preset
pusht-like --codec images`):
  .venv/bin/python bench/lerobot/parity_train.py --root /dev/shm/pusht --trainer target/release/trainer \
      --steps 300 --seeds 0 1 --batch-size 8 --threads 2 --out target/bench/parity.json
`--our-flags "--sampler.order blocks"` passes more flags to our trainer (here: does the
decode-once order move the loss curve?).
"""

import argparse
import csv
import json
import os
import shlex
import subprocess
import tempfile
import time
from pathlib import Path

import torch

from lerobot_loop import TINY, dataloader, endless, setup, update


def lerobot_losses(root: Path, seed: int, steps: int, batch_size: int) -> list[float]:
    """LeRobot 0.6.1's training loss at every step of a run from `seed`."""
    run = setup(root, seed, steps, TINY)
    assert run.cfg.use_group_norm, "the parity configuration trains GroupNorm"
    batches = endless(dataloader(run, batch_size, workers=0))
    run.policy.train()
    return [update(run, next(batches)) for _ in range(steps)]


def our_losses(
    trainer: Path, root: Path, seed: int, steps: int, batch_size: int, threads: int, flags: list[str]
) -> list[float]:
    """Our trainer's loss at every step of a run from `seed` (its metrics.csv, logged every step)."""
    with tempfile.TemporaryDirectory() as work:
        config = Path(work) / "parity.json"
        config.write_text(json.dumps({"policy": {"diffusion_step_embed_dim": TINY["diffusion_step_embed_dim"]}}))
        out = Path(work) / "run"
        command = [
            str(trainer), "--config_path", str(config), "--dataset.root", str(root),
            "--policy.preset", "classic", "--policy.n_obs_steps", str(TINY["n_obs_steps"]),
            "--policy.horizon", str(TINY["horizon"]), "--policy.n_action_steps", str(TINY["n_action_steps"]),
            "--policy.crop_shape", "x".join(map(str, TINY["crop_shape"])),
            "--policy.down_dims", ",".join(map(str, TINY["down_dims"])),
            "--policy.use_group_norm", "true",
            "--batch_size", str(batch_size), "--steps", str(steps), "--seed", str(seed),
            "--num_workers", str(threads), "--log_freq", "1", "--save_freq", "0", "--output_dir", str(out),
            *flags,
        ]
        subprocess.run(command, check=True, env={**os.environ, "RAYON_NUM_THREADS": str(threads)})
        with open(out / "metrics.csv") as f:
            return [float(row["loss"]) for row in csv.DictReader(f)]


def tail_mean(losses: list[float], n: int) -> float:
    return sum(losses[-n:]) / n


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", required=True, type=Path, help="a pusht-like dataset (images in parquet)")
    p.add_argument("--trainer", required=True, type=Path, help="our trainer binary")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--last", type=int, default=50, help="steps the final loss is averaged over")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--our-flags", default="", help="more flags for our trainer, e.g. '--sampler.order blocks'")
    p.add_argument("--out", required=True, type=Path)
    args = p.parse_args()
    flags = shlex.split(args.our_flags)
    torch.set_num_threads(args.threads)

    runs = []
    for side in ("lerobot", "ours"):
        for seed in args.seeds:
            start = time.perf_counter()
            if side == "lerobot":
                losses = lerobot_losses(args.root, seed, args.steps, args.batch_size)
            else:
                losses = our_losses(args.trainer, args.root, seed, args.steps, args.batch_size, args.threads, flags)
            assert len(losses) == args.steps, f"{side} seed {seed}: {len(losses)} losses for {args.steps} steps"
            run = {"side": side, "seed": seed, "seconds": round(time.perf_counter() - start, 1),
                   "first_loss": losses[0], "last_mean": tail_mean(losses, args.last), "losses": losses}
            runs.append(run)
            print(f"{side:8} seed {seed}: first loss {losses[0]:.4f}, mean of the last {args.last} "
                  f"{run['last_mean']:.4f} ({run['seconds']} s)", flush=True)

    def means(side):
        return [r["last_mean"] for r in runs if r["side"] == side]

    lerobot, ours = means("lerobot"), means("ours")
    spread = max(lerobot) - min(lerobot)
    lerobot_mean, ours_mean = sum(lerobot) / len(lerobot), sum(ours) / len(ours)
    gap = abs(ours_mean - lerobot_mean)
    verdict = {
        "lerobot_mean": lerobot_mean, "ours_mean": ours_mean, "gap": gap, "lerobot_seed_spread": spread,
        "ours_seed_spread": max(ours) - min(ours), "within_spread": gap <= spread,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"config": {**TINY, "steps": args.steps, "batch_size": args.batch_size,
                                               "seeds": args.seeds, "last": args.last, "our_flags": flags},
                                    "verdict": verdict, "runs": runs}, indent=1))
    print(f"mean loss over the last {args.last} of {args.steps} steps: LeRobot {lerobot_mean:.4f} "
          f"(seeds spread {spread:.4f}), ours {ours_mean:.4f} (spread {verdict['ours_seed_spread']:.4f}); "
          f"gap {gap:.4f}: {'within' if verdict['within_spread'] else 'OUTSIDE'} LeRobot's seed spread")


if __name__ == "__main__":
    main()
