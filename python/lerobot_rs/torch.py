"""PyTorch's conventions over the native reader and loader.

- :class:`Dataset` is a map-style ``torch.utils.data.Dataset`` with ``LeRobotDataset``'s
  arguments and samples. It pickles (so it goes to ``spawn`` workers) and has a batched
  ``__getitems__``.
- :class:`DataLoader` gives collated batches of torch tensors from native worker threads in
  LeRobot's training order. It takes its rank and world size from ``torch.distributed`` when a
  process group is up. It has ``set_epoch`` and a ``state_dict`` that refuses to resume under
  another seed, batch size or world size. Frames travel as uint8 in pinned memory and become
  float32 in [0, 1] on the device.

PyTorch is not a dependency of the wheel: importing this module imports it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.utils.data

from . import _native

__all__ = ["DataLoader", "Dataset", "distributed_rank_and_world_size"]

#: ``LeRobotDataset`` arguments that only matter when recording, or that this reader does not
#: implement, with their defaults: any other value is refused with ``NotImplementedError``.
_UNSUPPORTED_DEFAULTS: dict[str, Any] = {
    "episode_filter": None,
    "force_cache_sync": False,
    "download_videos": True,
    "depth_output_unit": None,
    "batch_encoding_size": 1,
    "rgb_encoder": None,
    "depth_encoder": None,
    "encoder_threads": None,
    "streaming_encoding": False,
    "encoder_queue_maxsize": 30,
}


class Dataset(torch.utils.data.Dataset):
    """A LeRobot dataset (v3.0 or v2.1) with ``LeRobotDataset``'s samples, as torch tensors.

    The arguments are ``LeRobotDataset``'s: ``repo_id`` (found where LeRobot keeps it, or
    downloaded; ``download=False`` refuses to), or ``root`` alone; ``episodes``;
    ``image_transforms`` (a callable applied to each camera frame, as LeRobot applies it);
    ``delta_timestamps``; ``tolerance_s``; ``revision``; ``return_uint8`` (frames as stored
    rather than float32 in [0, 1]). ``video_backend`` is accepted and has no effect: frames are
    decoded by FFmpeg, equal to the bit to LeRobot's. Several datasets (LeRobot's
    ``MultiLeRobotDataset``) and the recording arguments are refused with ``NotImplementedError``.
    """

    def __init__(
        self,
        repo_id: str | None = None,
        root: str | os.PathLike[str] | None = None,
        episodes: Sequence[int] | None = None,
        image_transforms: Callable[[torch.Tensor], torch.Tensor] | None = None,
        delta_timestamps: dict[str, list[float]] | None = None,
        tolerance_s: float = 1e-4,
        revision: str | None = None,
        *,
        return_uint8: bool = False,
        video_backend: str | None = None,
        download: bool = True,
        **lerobot_only: Any,
    ) -> None:
        if isinstance(repo_id, (list, tuple)):
            raise NotImplementedError(
                "several datasets in one (LeRobot's MultiLeRobotDataset) are not supported: "
                "open one Dataset per repo_id, or train with the Rust trainer, which takes several"
            )
        refused = [
            name
            for name, value in lerobot_only.items()
            if name not in _UNSUPPORTED_DEFAULTS or value != _UNSUPPORTED_DEFAULTS[name]
        ]
        if refused:
            raise NotImplementedError(
                f"lerobot_rs.torch.Dataset reads datasets; not supported: {', '.join(refused)}"
            )
        del video_backend  # FFmpeg decodes every video, whatever LeRobot would have used.
        self._arguments = {
            "repo_id": repo_id,
            "root": None if root is None else str(root),
            "episodes": None if episodes is None else [int(e) for e in episodes],
            "delta_timestamps": delta_timestamps,
            "tolerance_s": tolerance_s,
            "revision": revision,
            "download": download,
        }
        self.image_transforms = image_transforms
        self.return_uint8 = return_uint8
        self._open()

    def _open(self) -> None:
        self._native = self.native("uint8" if self.return_uint8 else "float32")
        meta = self._native.meta
        self.camera_keys: list[str] = [
            key for key, feature in meta.features.items() if feature["dtype"] in ("image", "video")
        ]

    def native(self, frames: str) -> _native.Dataset:
        """The native dataset with these arguments, frames as ``"uint8"`` or ``"float32"``."""
        return _native.Dataset(**self._arguments, frames=frames, as_torch=True)

    def __getstate__(self) -> dict[str, Any]:
        # The arguments, not the open files: a worker process opens the dataset again.
        return {
            "arguments": self._arguments,
            "image_transforms": self.image_transforms,
            "return_uint8": self.return_uint8,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._arguments = state["arguments"]
        self.image_transforms = state["image_transforms"]
        self.return_uint8 = state["return_uint8"]
        self._open()

    def __len__(self) -> int:
        return len(self._native)

    def __getitem__(self, index: int) -> dict[str, Any]:
        item = self._native[index]
        if self.image_transforms is not None:
            for key in self.camera_keys:
                item[key] = self.image_transforms(item[key])
        return item

    def __getitems__(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        """The samples at ``indices``, for a ``DataLoader`` fetching a batch at once."""
        return [self[int(i)] for i in indices]

    @property
    def meta(self) -> Any:
        """LeRobot's ``meta``: ``fps``, ``features``, ``info``, ``stats``, ``tasks``, ..."""
        return self._native.meta

    @property
    def root(self) -> Path:
        """The dataset's folder."""
        return Path(self._native.root)

    @property
    def episodes(self) -> list[int] | None:
        """The episodes asked for (``None``: all), as LeRobot's ``episodes``."""
        return self._arguments["episodes"]

    @property
    def delta_timestamps(self) -> dict[str, list[float]] | None:
        """The windows asked for, as LeRobot's ``delta_timestamps``."""
        return self._arguments["delta_timestamps"]

    @property
    def num_frames(self) -> int:
        """Frames (of the episodes asked for)."""
        return self._native.num_frames

    @property
    def num_episodes(self) -> int:
        """Episodes (asked for)."""
        return self._native.num_episodes

    @property
    def fps(self) -> int:
        """Frames per second."""
        return self.meta.fps

    @property
    def features(self) -> dict[str, Any]:
        """The features, as in ``info.json``."""
        return self.meta.features

    def __repr__(self) -> str:
        return f"lerobot_rs.torch.{self._native!r}"


def distributed_rank_and_world_size() -> tuple[int, int]:
    """This process's rank and the world size: ``torch.distributed``'s when a process group is
    up, else the ``RANK`` and ``WORLD_SIZE`` that ``torchrun`` and ``accelerate launch`` set,
    else a single process."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


class DataLoader:
    """Collated training batches of a :class:`Dataset` as torch tensors, in LeRobot's order.

    Each ``for batch in loader`` is one epoch, as with ``torch.utils.data.DataLoader``. Batches
    are made by ``num_workers`` native threads (no processes); the order is LeRobot's training
    sampler's for ``seed`` (each epoch shuffled by its own permutation, ``drop_n_last_frames``
    skipped at each episode's end, or exactly ``frames`` when given).

    ``rank`` and ``world_size`` default to :func:`distributed_rank_and_world_size`; each rank
    gets a disjoint, equally long shard of every epoch. Frames come out of the workers as uint8.
    With ``device`` every tensor is copied there (from pinned memory, asynchronously, when it is
    a CUDA device). Then the frames become float32 in [0, 1], equal to the bit to LeRobot's,
    on the device when one is given, unless the dataset has ``return_uint8``.
    ``frame_cache`` is the native loader's (``"auto"``: decoded frames in shared memory when
    they fit).
    """

    def __init__(
        self,
        dataset: Dataset,
        batch_size: int = 8,
        *,
        shuffle: bool = True,
        seed: int = 1000,
        num_workers: int = 2,
        drop_last: bool = False,
        drop_n_first_frames: int = 0,
        drop_n_last_frames: int = 0,
        frames: Sequence[int] | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        device: str | torch.device | None = None,
        pin_memory: bool | None = None,
        prefetch: int = 4,
        frame_cache: str | os.PathLike[str] | None = None,
    ) -> None:
        if not isinstance(dataset, Dataset):
            raise TypeError(f"expected a lerobot_rs.torch.Dataset, got {type(dataset).__name__}")
        if (rank is None) != (world_size is None):
            raise ValueError("give both rank and world_size, or neither (torch.distributed's then)")
        if rank is None or world_size is None:
            rank, world_size = distributed_rank_and_world_size()
        self.dataset = dataset
        self.batch_size = batch_size
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.device = None if device is None else torch.device(device)
        if pin_memory is None:
            pin_memory = self.device is not None and self.device.type == "cuda"
        self.pin_memory = pin_memory
        self._native = _native.Loader(
            dataset.native("uint8"),
            batch_size,
            num_workers=num_workers,
            shuffle=shuffle,
            seed=seed,
            drop_last=drop_last,
            drop_n_first_frames=drop_n_first_frames,
            drop_n_last_frames=drop_n_last_frames,
            frames=None if frames is None else [int(f) for f in frames],
            rank=rank,
            world_size=world_size,
            prefetch=prefetch,
            frame_cache=None if frame_cache is None else str(frame_cache),
            as_torch=True,
            pin_memory=pin_memory,
        )
        # The epoch and position the next batch comes from.
        self._epoch = 0
        self._position = 0

    def __len__(self) -> int:
        """Batches per epoch (of this rank)."""
        return len(self._native)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        epoch = self._epoch
        for batch in self._native:
            state = self._native.state_dict()
            self._epoch, self._position = state["epoch"], state["position"]
            yield self._finish(batch)
        self._epoch, self._position = epoch + 1, 0

    def set_epoch(self, epoch: int) -> None:
        """Start the next ``for`` loop at the beginning of ``epoch`` (``DistributedSampler``'s
        convention). Calling it with the epoch the loader is about to start changes nothing."""
        if (epoch, 0) != (self._epoch, self._position):
            self._seek(epoch, 0)

    def state_dict(self) -> dict[str, int]:
        """Where the loader stands after the last batch handed out, and what it was run with."""
        return {
            "epoch": self._epoch,
            "position": self._position,
            "seed": self.seed,
            "batch_size": self.batch_size,
            "world_size": self.world_size,
        }

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Continue from a ``state_dict()``: the next batch is the one that followed it. A state
        written with another seed, batch size or world size is refused: its position would mean
        other samples."""
        for name in ("seed", "batch_size", "world_size"):
            if name in state and state[name] != getattr(self, name):
                raise ValueError(
                    f"the loader state was written with {name}={state[name]}, "
                    f"this loader has {name}={getattr(self, name)}: resuming would give other batches"
                )
        self._seek(int(state["epoch"]), int(state["position"]))

    def _seek(self, epoch: int, position: int) -> None:
        self._native.load_state_dict({"epoch": epoch, "position": position})
        self._epoch, self._position = epoch, position

    def _finish(self, batch: dict[str, Any]) -> dict[str, Any]:
        if self.device is not None:
            for key, value in batch.items():
                if isinstance(value, torch.Tensor):
                    # From pinned memory the copy is asynchronous, on the device's stream.
                    batch[key] = value.to(self.device, non_blocking=self.pin_memory)
        if not self.dataset.return_uint8:
            for key in self.dataset.camera_keys:
                # As LeRobot's decoders: `frames.type(torch.float32) / 255`.
                batch[key] = batch[key].to(torch.float32) / 255
        transforms = self.dataset.image_transforms
        if transforms is not None:
            for key in self.dataset.camera_keys:
                batch[key] = torch.stack([transforms(frame) for frame in batch[key]])
        return batch
