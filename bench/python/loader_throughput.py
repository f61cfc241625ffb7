"""Loader throughput from Python (the lerobot_rs wheel), for comparison with `bench loader` on
the same cell: samples/s over `--seconds` after the first batch, Diffusion Policy's windows.

    python bench/python/loader_throughput.py --root /dev/shm/pusht-av1 --workers 2 --batch-size 64
"""

import argparse
import json
import time

import lerobot_rs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--frames", choices=["uint8", "float32"], default="uint8")
    parser.add_argument("--frame-cache", default=None)
    args = parser.parse_args()

    probe = lerobot_rs.Dataset(root=args.root)
    fps = probe.meta.fps
    cameras = [k for k, f in probe.meta.features.items() if f["dtype"] in ("video", "image")]
    deltas = {k: [-1 / fps, 0.0] for k in [*cameras, "observation.state"]}
    deltas["action"] = [k / fps for k in range(-1, 15)]
    dataset = lerobot_rs.Dataset(root=args.root, delta_timestamps=deltas, frames=args.frames)
    loader = lerobot_rs.Loader(
        dataset,
        args.batch_size,
        num_workers=args.workers,
        drop_n_last_frames=7,
        frame_cache=args.frame_cache,
    )

    def batches():
        while True:
            yield from loader

    stream = batches()
    next(stream)
    samples, started = 0, time.perf_counter()
    while time.perf_counter() - started < args.seconds:
        samples += len(next(stream)["index"])
    elapsed = time.perf_counter() - started
    print(json.dumps({"root": args.root, "workers": args.workers, "batch_size": args.batch_size,
                      "frames": args.frames, "samples_per_s": round(samples / elapsed)}))


if __name__ == "__main__":
    main()
