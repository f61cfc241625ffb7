"""LeRobot's samples and batches from a native loader.

``Dataset`` reads a LeRobot dataset (v3.0 or v2.1) as ``LeRobotDataset`` does; ``Loader`` gives
its collated training batches from native worker threads, resumable with ``state_dict()``.
"""

from ._native import Dataset, DatasetError, Loader

__all__ = ["Dataset", "DatasetError", "Loader"]
