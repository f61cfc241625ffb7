#!/usr/bin/env python
"""LeRobot 0.6.1's own training loop with our loader in place of its DataLoader: data_s (time
waiting for the next batch) and updt_s (LeRobot's update step) against the unchanged loop.

Both sides run lerobot-train's loop (lerobot_train.py without accelerate): `set_seed`,
`make_policy`, `make_pre_post_processors`, the policy's optimizer and scheduler presets, then per
step preprocessor -> forward -> backward -> clip_grad_norm_ -> optimizer step -> zero_grad ->
scheduler step. LeRobot's side feeds it `DataLoader(LeRobotDataset, sampler=EpisodeAwareSampler,
num_workers, prefetch_factor=2)` as lerobot-train builds it; ours `lerobot_rs.Loader(
lerobot_rs.Dataset(..., as_torch=True))` with the same batch size, workers, seed and
`drop_n_last_frames`. The policy is the tiny Diffusion Policy of `parity_train.py` (PushT classic
recipe, U-Net 64/128/256) unless `--policy classic`.

Usage (LeRobot 0.6.1's venv with the lerobot_rs wheel installed; a LeRobot-format dataset):
  .venv/bin/python bench/lerobot/train_with_our_loader.py --root /dev/shm/pusht-av1 \
      --steps 30 --batch-size 8 --workers 2 --threads 2 --out target/bench/lerobot_loop.json
"""

import argparse
import json
import time
from pathlib import Path

import torch

from lerobot_loop import TINY, dataloader, endless, setup, update


def run(side: str, root: Path, policy_name: str, steps: int, batch_size: int, workers: int, seed: int) -> dict:
    """`steps` of LeRobot's training loop fed by `side`'s loader: data_s and updt_s of each step."""
    training = setup(root, seed, steps, TINY if policy_name == "tiny" else {})
    if side == "lerobot":
        loader = dataloader(training, batch_size, workers)
    else:
        import lerobot_rs

        dataset = lerobot_rs.Dataset(root=root, delta_timestamps=training.delta_timestamps, as_torch=True)
        loader = lerobot_rs.Loader(
            dataset, batch_size, num_workers=workers, drop_n_last_frames=training.cfg.drop_n_last_frames, seed=seed
        )
    stream = endless(loader)
    training.policy.train()
    data_s, updt_s, losses = [], [], []
    for _ in range(steps):
        start = time.perf_counter()
        batch = next(stream)
        loaded = time.perf_counter()
        losses.append(update(training, batch))
        data_s.append(loaded - start)
        updt_s.append(time.perf_counter() - loaded)
    return {"side": side, "data_s": data_s, "updt_s": updt_s, "losses": losses}


def summary(run: dict, skip: int) -> dict:
    data, updt = run["data_s"][skip:], run["updt_s"][skip:]
    total = sum(data) + sum(updt)
    return {
        "side": run["side"],
        "data_s_mean": sum(data) / len(data),
        "updt_s_mean": sum(updt) / len(updt),
        "data_share": sum(data) / total,
        "steps_per_s": len(data) / total,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", required=True, type=Path)
    p.add_argument("--policy", choices=["tiny", "classic"], default="tiny")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--skip", type=int, default=3, help="first steps left out of the means (warm-up)")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1000)
    p.add_argument("--out", required=True, type=Path)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    runs, rows = [], []
    for side in ("lerobot", "ours"):
        result = run(side, args.root, args.policy, args.steps, args.batch_size, args.workers, args.seed)
        runs.append(result)
        rows.append(summary(result, args.skip))
        r = rows[-1]
        print(f"{side:8} data_s {1e3 * r['data_s_mean']:8.1f} ms  updt_s {1e3 * r['updt_s_mean']:8.1f} ms  "
              f"data {100 * r['data_share']:5.1f}%  {r['steps_per_s']:.2f} steps/s", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"config": vars(args) | {"root": str(args.root), "out": str(args.out)},
                                    "summary": rows, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
