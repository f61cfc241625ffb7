#!/usr/bin/env python
"""LeRobot 0.6.1's Diffusion Policy training step on a GPU, for the side-by-side with `bench sweep
--device cuda`: the policy, pre-processor, optimiser and scheduler built as `lerobot-train` builds
them (`make_policy`, `make_pre_post_processors`, the config's presets), one real batch of the
dataset reused every step, and LeRobot's update step (pre-processor, forward, backward,
`clip_grad_norm_`, Adam, `zero_grad`, scheduler), each phase timed after `torch.cuda.synchronize()`.

Modes: `f32` (eager, as `lerobot-train` runs without accelerate's mixed precision) and `bf16`
(the forward under `torch.autocast("cuda", torch.bfloat16)`, as accelerate's `mixed_precision=
"bf16"` runs it; no loss scaling is needed in bf16).

`--profile` adds one step under torch's profiler: the CUDA kernels of each phase and the costliest.

Usage (on the GPU machine, through `scripts/gpu-run.sh lerobot`):
  python3 bench/lerobot/train_step_gpu.py --root DATASET --batch-sizes 64 256 --modes f32 bf16 \
      --warmup 5 --steps 20 --out OUT/lerobot_gpu.json
"""

import argparse
import contextlib
import importlib.metadata as md
import json
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader

from lerobot.datasets.factory import resolve_delta_timestamps
from lerobot.datasets.lerobot_dataset import LeRobotDataset, LeRobotDatasetMetadata
from lerobot.policies import make_policy, make_pre_post_processors
from lerobot.policies.diffusion.configuration_diffusion import DiffusionConfig

# PushT's classic Diffusion Policy recipe (262,709,026 parameters), our `classic` preset.
CLASSIC = dict(horizon=16, n_action_steps=8, crop_shape=(84, 84), pretrained_backbone_weights=None)


def run(root: Path, batch_size: int, mode: str, args) -> dict:
    torch.manual_seed(0)
    meta = LeRobotDatasetMetadata(f"local/{root.name}", root=root)
    cfg = DiffusionConfig(device=args.device, **CLASSIC)
    policy = make_policy(cfg, ds_meta=meta)
    pre, _post = make_pre_post_processors(cfg, dataset_stats=meta.stats)
    preset = cfg.get_optimizer_preset()
    optimizer = preset.build(policy.get_optim_params())
    scheduler = cfg.get_scheduler_preset().build(optimizer, 100_000)
    dataset = LeRobotDataset(f"local/{root.name}", root=root, delta_timestamps=resolve_delta_timestamps(cfg, meta))
    generator = torch.Generator().manual_seed(0)
    raw = next(iter(DataLoader(dataset, batch_size=batch_size, shuffle=True, drop_last=True, generator=generator)))
    policy.train()
    autocast = (lambda: torch.autocast(args.device, dtype=torch.bfloat16)) if mode == "bf16" else contextlib.nullcontext
    cuda = args.device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    phases = {"preprocess": [], "forward": [], "backward": [], "clip": [], "optim": [], "step": []}
    losses = []
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    for step in range(args.warmup + args.steps):
        sync()
        t0 = time.perf_counter()
        batch = pre(dict(raw))
        sync()
        t1 = time.perf_counter()
        with autocast():
            loss, _ = policy.forward(batch)
        sync()
        t2 = time.perf_counter()
        loss.backward()
        sync()
        t3 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), preset.grad_clip_norm, error_if_nonfinite=False)
        sync()
        t4 = time.perf_counter()
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()
        sync()
        t5 = time.perf_counter()
        losses.append(float(loss.item()))
        if step >= args.warmup:
            for key, value in zip(phases, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t5 - t0)):
                phases[key].append(1000 * value)
    profile = kernel_profile(policy, pre, raw, optimizer, scheduler, preset, autocast, sync) if args.profile else None
    mean = {k: sum(v) / len(v) for k, v in phases.items()}
    result = {
        "batch_size": batch_size,
        "mode": mode,
        "params": sum(p.numel() for p in policy.parameters()),
        "step_ms_mean": round(mean["step"], 2),
        "step_ms_median": round(sorted(phases["step"])[len(phases["step"]) // 2], 2),
        "phase_ms_mean": {k: round(v, 2) for k, v in mean.items()},
        "samples_per_s": round(batch_size * 1000 / mean["step"], 1),
        "peak_memory_gb": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
        "losses": [round(x, 4) for x in losses],
        "profile": profile,
    }
    print(json.dumps(result), flush=True)
    return result


def kernel_profile(policy, pre, raw, optimizer, scheduler, preset, autocast, sync) -> dict:
    """One more step under torch's profiler, phase by phase: the CUDA kernels each launched (and
    memory copies and sets, counted apart) and their GPU time, and the step's costliest kernels."""
    from torch.profiler import ProfilerActivity, profile

    def device_ms(event):
        return (getattr(event, "device_time_total", None) or getattr(event, "cuda_time_total", 0)) / 1000

    state = {}
    phases = {
        "preprocess": lambda: state.update(batch=pre(dict(raw))),
        "forward": lambda: state.update(loss=policy.forward(state["batch"])[0]),
        "backward": lambda: state["loss"].backward(),
        "clip": lambda: torch.nn.utils.clip_grad_norm_(policy.parameters(), preset.grad_clip_norm, error_if_nonfinite=False),
        "optim": lambda: (optimizer.step(), optimizer.zero_grad(), scheduler.step()),
    }
    result, kernels = {}, {}
    for name, phase in phases.items():
        sync()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            with autocast() if name == "forward" else contextlib.nullcontext():
                phase()
            sync()
        gpu = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
        copies = [e for e in gpu if e.key.startswith(("Memcpy", "Memset"))]
        launched = [e for e in gpu if e not in copies]
        result[name] = {
            "kernels": sum(e.count for e in launched),
            "copies_and_sets": sum(e.count for e in copies),
            "gpu_ms": round(sum(device_ms(e) for e in gpu), 3),
        }
        for e in launched:
            count, ms = kernels.get(e.key, (0, 0.0))
            kernels[e.key] = (count + e.count, ms + device_ms(e))
    result["step_kernels"] = sum(p["kernels"] for p in result.values())
    top = sorted(kernels.items(), key=lambda kv: -kv[1][1])[:15]
    result["top_kernels"] = [{"kernel": k[:120], "count": c, "gpu_ms": round(ms, 3)} for k, (c, ms) in top]
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True, type=Path)
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[64, 256])
    parser.add_argument("--modes", nargs="+", default=["f32", "bf16"], choices=["f32", "bf16"])
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--device", default="cuda", help="cuda; cpu only to try the script")
    parser.add_argument("--profile", action="store_true", help="count each phase's CUDA kernels with torch's profiler")
    args = parser.parse_args()
    torch.backends.cudnn.benchmark = True  # as lerobot-train sets it
    torch.backends.cuda.matmul.allow_tf32 = True
    results = [run(args.root, b, m, args) for b in args.batch_sizes for m in args.modes]
    env = {
        "device": torch.cuda.get_device_name(0) if args.device == "cuda" else args.device,
        **{k: md.version(k) for k in ("lerobot", "torch", "torchvision", "diffusers")},
    }
    args.out.write_text(json.dumps({"env": env, "results": results}, indent=2))
    print("wrote", args.out)


if __name__ == "__main__":
    main()
