"""LeRobot's samples and batches from a native loader.

``Dataset`` reads a LeRobot dataset (v3.0 or v2.1) as ``LeRobotDataset`` does; ``Loader`` gives
its collated training batches from native worker threads, resumable with ``state_dict()``.
``lerobot_rs.torch`` follows PyTorch's conventions (a map-style ``Dataset``, a ``DataLoader`` of
torch tensors); ``lerobot_rs.train`` (``lerobot-rs-train``) runs LeRobot's own training with this
loader. Both import PyTorch, which the package does not depend on.
"""

from ._native import Dataset, DatasetError, Loader

__all__ = ["Dataset", "DatasetError", "Loader"]
