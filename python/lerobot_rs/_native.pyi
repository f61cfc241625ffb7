"""Type stubs of the native module (python/src): the reader and the loader."""

import os
from collections.abc import Iterator, Sequence
from types import SimpleNamespace
from typing import Any, Literal

class DatasetError(Exception):
    """A dataset that cannot be read: the message names the file and the field."""

class Dataset:
    """A LeRobot dataset (v3.0 or v2.1), read as LeRobot reads it."""

    def __init__(
        self,
        repo_id: str | None = None,
        root: str | os.PathLike[str] | None = None,
        *,
        episodes: Sequence[int] | None = None,
        delta_timestamps: dict[str, list[float]] | None = None,
        tolerance_s: float = 1e-4,
        revision: str | None = None,
        download: bool = True,
        frames: Literal["float32", "uint8"] = "float32",
        as_torch: bool = False,
    ) -> None: ...
    def __len__(self) -> int: ...
    def __getitem__(self, index: int) -> dict[str, Any]:
        """LeRobot's sample: numpy arrays (or torch tensors with `as_torch`) and `task`."""
    @property
    def num_frames(self) -> int: ...
    @property
    def num_episodes(self) -> int: ...
    @property
    def root(self) -> str: ...
    @property
    def meta(self) -> SimpleNamespace:
        """`fps`, `features`, `info`, `stats`, `tasks`, `total_episodes`, `total_frames`, `robot_type`."""

class Loader:
    """LeRobot's training batches of a `Dataset`, made by native worker threads."""

    def __init__(
        self,
        dataset: Dataset,
        batch_size: int = 8,
        *,
        num_workers: int = 0,
        shuffle: bool = True,
        seed: int = 1000,
        drop_last: bool = False,
        drop_n_first_frames: int = 0,
        drop_n_last_frames: int = 0,
        rank: int = 0,
        world_size: int = 1,
        prefetch: int = 4,
        frame_cache: str | os.PathLike[str] | None = None,
        frame_cache_budget_gb: float | None = None,
        as_torch: bool | None = None,
        pin_memory: bool = False,
        order: Literal["lerobot", "blocks"] = "lerobot",
        block_episodes: int = ...,
        frames: Sequence[int] | None = None,
    ) -> None: ...
    @property
    def frame_cache(self) -> str | None: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[dict[str, Any]]: ...
    def __next__(self) -> dict[str, Any]: ...
    def state_dict(self) -> dict[str, int]:
        """`{"epoch": e, "position": p}` after the last batch handed out."""
    def load_state_dict(self, state: dict[str, int]) -> None: ...
