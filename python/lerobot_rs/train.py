"""LeRobot's ``lerobot-train`` with this loader in place of its ``DataLoader``.

``python -m lerobot_rs.train`` (or ``lerobot-rs-train``) takes ``lerobot-train``'s flags and runs
LeRobot 0.6.1's own training: its policy, processors, optimiser, scheduler, checkpoints and logs.
Only the training batches differ in where they come from: native threads instead of worker
processes, the same batches, in the same order, equal to the bit (frames decoded once into a
shared-memory cache when they fit, see ``--frame-cache`` below).

The swap is made where LeRobot builds its training ``DataLoader``: a ``LeRobotDataset`` sampled
by LeRobot's ``EpisodeAwareSampler``. Every other ``DataLoader`` (the evaluation split's) is
PyTorch's. Two flags of our own come before LeRobot's and are removed from them:

- ``--loader-threads=N``: the native loader's threads (default: ``--num_workers``, at least 1);
- ``--frame-cache=auto|off|DIR``: decoded frames (default ``auto``, as the Rust trainer).

With several processes (``accelerate launch``), each rank reads a disjoint shard of every epoch
(every ``world_size``-th sample, as ``DistributedSampler``), where accelerate would give each
rank every ``world_size``-th batch: the same samples per epoch, grouped otherwise.
"""

from __future__ import annotations

import logging
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
import torch.utils.data

from .torch import DataLoader, Dataset

#: The LeRobot release whose training loop this module drives.
LEROBOT_VERSION = "0.6.1"

_logger = logging.getLogger("lerobot_rs")


class LeRobotTrainingLoader(DataLoader):
    """The native loader standing in for ``lerobot-train``'s ``DataLoader``.

    Like PyTorch's ``DataLoader``, each epoch draws one number from torch's global random
    generator as it starts (PyTorch's workers' base seed): the policy's random crops and noise
    then see the random stream they see under LeRobot's own loader.
    """

    def __iter__(self) -> Iterator[dict[str, Any]]:
        torch.empty((), dtype=torch.int64).random_()
        return super().__iter__()


def sampler_frames(sampler: Any) -> np.ndarray:
    """The dataset rows an ``EpisodeAwareSampler`` (0.6.1) samples, in its unshuffled order."""
    lengths = np.diff(np.concatenate([[0], sampler._cum_lengths]))
    return np.concatenate(
        [np.arange(start, start + length) for start, length in zip(sampler._starts, lengths)]
    )


def resumed_step(state: dict[str, int], frames: int, batch_size: int, processes: int) -> int:
    """The training step a resumed ``EpisodeAwareSampler`` state stands for: the inverse of
    LeRobot's ``compute_sampler_state`` (accelerate's batches per epoch, ``even_batches``)."""
    batches_per_epoch = math.ceil(math.ceil(frames / batch_size) / processes)
    return state["epoch"] * batches_per_epoch + state["start_index"] // (batch_size * processes)


def loader_for(
    dataset: Any, sampler: Any, batch_size: int, threads: int, frame_cache: str
) -> LeRobotTrainingLoader:
    """Our loader giving the batches ``DataLoader(dataset, batch_size, sampler=sampler)`` gives,
    for a ``LeRobotDataset`` and its training sampler, resumed where the sampler was set."""
    ours = Dataset(
        root=dataset.root,
        episodes=dataset.episodes,
        image_transforms=dataset.image_transforms,
        delta_timestamps=dataset.delta_timestamps,
        tolerance_s=dataset.tolerance_s,
        # Frames travel as uint8, which LeRobot's loop turns into its float32 frames on the
        # device. Transforms see the frames LeRobot's dataset would give them.
        return_uint8=dataset.image_transforms is None or dataset._return_uint8,
    )
    from accelerate import PartialState

    device = PartialState().device
    loader = LeRobotTrainingLoader(
        ours,
        batch_size,
        shuffle=sampler.shuffle,
        seed=sampler.seed,
        num_workers=threads,
        frames=sampler_frames(sampler).tolist(),
        device=device,
        frame_cache=None if frame_cache == "off" else frame_cache,
    )
    state = sampler.state_dict()
    if state["epoch"] or state["start_index"]:
        step = resumed_step(state, len(sampler), batch_size, loader.world_size)
        epoch, batches = divmod(step, len(loader))
        loader.load_state_dict({"epoch": epoch, "position": batches * batch_size})
    _logger.info(
        "lerobot_rs: training batches from %d native threads, rank %d of %d",
        threads,
        loader.rank,
        loader.world_size,
    )
    return loader


@contextmanager
def native_training_loader(threads: int | None, frame_cache: str) -> Iterator[None]:
    """While open, ``torch.utils.data.DataLoader(lerobot_dataset, sampler=EpisodeAwareSampler)``
    makes our loader; any other ``DataLoader`` is PyTorch's, and ``isinstance`` checks against
    ``DataLoader`` answer as before."""
    from lerobot.datasets import EpisodeAwareSampler, LeRobotDataset

    original = torch.utils.data.DataLoader

    class _Dispatch(type):
        def __instancecheck__(cls, instance: Any) -> bool:
            return isinstance(instance, original)

        def __subclasscheck__(cls, subclass: type) -> bool:
            return issubclass(subclass, original)

    made = 0

    class DataLoaderOrOurs(metaclass=_Dispatch):
        def __new__(cls, dataset: Any, *args: Any, **kwargs: Any) -> Any:
            nonlocal made
            made += 1
            sampler = kwargs.get("sampler")
            if isinstance(dataset, LeRobotDataset) and isinstance(sampler, EpisodeAwareSampler):
                workers = kwargs.get("num_workers", 0)
                return loader_for(
                    dataset,
                    sampler,
                    kwargs.get("batch_size", 1),
                    threads if threads is not None else max(workers, 1),
                    frame_cache,
                )
            if made == 1:
                # lerobot-train builds its training DataLoader first.
                _logger.warning(
                    "lerobot_rs: the training batches come from PyTorch's DataLoader: its dataset "
                    "is a %s (several datasets, or streaming), which this loader does not read",
                    type(dataset).__name__,
                )
            return original(dataset, *args, **kwargs)

    torch.utils.data.DataLoader = DataLoaderOrOurs
    try:
        yield
    finally:
        torch.utils.data.DataLoader = original


def _take_flag(argv: list[str], name: str) -> str | None:
    """Removes ``--name=value`` or ``--name value`` from ``argv`` and returns the value."""
    for i, arg in enumerate(argv):
        if arg == f"--{name}" and i + 1 < len(argv):
            value = argv[i + 1]
            del argv[i : i + 2]
            return value
        if arg.startswith(f"--{name}="):
            del argv[i]
            return arg.split("=", 1)[1]
    return None


def main() -> None:
    """``lerobot-train`` with this loader: see the module's documentation."""
    import lerobot

    if lerobot.__version__ != LEROBOT_VERSION:
        raise SystemExit(
            f"lerobot_rs.train drives LeRobot {LEROBOT_VERSION}'s training loop; "
            f"this environment has LeRobot {lerobot.__version__}"
        )
    from lerobot.scripts import lerobot_train

    threads = _take_flag(sys.argv, "loader-threads")
    frame_cache = _take_flag(sys.argv, "frame-cache") or "auto"
    with native_training_loader(None if threads is None else int(threads), frame_cache):
        lerobot_train.main()


if __name__ == "__main__":
    main()
