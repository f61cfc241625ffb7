"""`lerobot_rs.torch` under PyTorch's conventions: samples equal to the native reader's, a dataset
that goes to spawned workers, batches equal to the native loader's, frames turned to float32
exactly as LeRobot's decoders turn them, shards from the environment's rank and world size,
`set_epoch`, and a `state_dict` that resumes exactly and refuses other settings.

PyTorch is not a dependency of the wheel: these tests run where it is installed
(`scripts/test-with-lerobot.sh`) and are skipped elsewhere.
"""

import pickle
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import lerobot_rs  # noqa: E402
from lerobot_rs.torch import DataLoader, Dataset  # noqa: E402

PUSHT = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "lerobot-0.6.1" / "pusht_mini"
DIFFUSION = {
    "observation.image": [-0.1, 0.0],
    "observation.state": [-0.1, 0.0],
    "action": [k / 10 for k in range(-1, 15)],
}


def pusht(**kwargs):
    return Dataset(root=PUSHT, delta_timestamps=DIFFUSION, **kwargs)


def assert_samples_equal(a, b):
    assert sorted(a) == sorted(b)
    for key in a:
        if isinstance(a[key], torch.Tensor):
            assert a[key].dtype == b[key].dtype, key
            assert torch.equal(a[key], b[key]), key
        else:
            assert a[key] == b[key], key


def test_samples_are_the_native_readers_as_tensors_and_survive_pickling():
    dataset = pusht()
    native = lerobot_rs.Dataset(root=PUSHT, delta_timestamps=DIFFUSION)
    assert len(dataset) == len(native) == 836 and dataset.camera_keys == ["observation.image"]
    for index in (0, 97, 835):
        sample = dataset[index]
        expected = native[index]
        assert sample.pop("task") == expected.pop("task")
        for key, value in expected.items():
            np.testing.assert_array_equal(sample[key].numpy(), value, err_msg=key)
    copy = pickle.loads(pickle.dumps(dataset))
    assert_samples_equal(copy[97], dataset[97])
    assert [s["index"].item() for s in dataset.__getitems__([5, 3])] == [5, 3]


def test_pytorchs_dataloader_with_spawned_workers_collates_our_samples():
    dataset = pusht()
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=4, num_workers=2, multiprocessing_context="spawn"
    )
    batch = next(iter(loader))
    expected = torch.utils.data.default_collate([dataset[i] for i in range(4)])
    assert_samples_equal(batch, expected)


def test_batches_are_the_native_loaders_with_frames_as_lerobots_floats():
    ours = DataLoader(pusht(), 32, seed=3, drop_n_last_frames=7)
    native = lerobot_rs.Loader(
        lerobot_rs.Dataset(root=PUSHT, delta_timestamps=DIFFUSION), 32, seed=3, drop_n_last_frames=7
    )
    assert len(ours) == len(native)
    for batch, expected in zip(ours, native):
        assert batch["observation.image"].dtype == torch.float32
        for key, value in expected.items():
            got = batch[key]
            got = got if isinstance(got, list) else got.numpy()
            np.testing.assert_array_equal(got, value, err_msg=key)
    as_stored = DataLoader(pusht(return_uint8=True), 32, seed=3, drop_n_last_frames=7)
    on_device = DataLoader(pusht(), 32, seed=3, drop_n_last_frames=7, device="cpu")
    stored, converted = next(iter(as_stored)), next(iter(on_device))
    assert stored["observation.image"].dtype == torch.uint8
    assert torch.equal(converted["observation.image"], stored["observation.image"].float() / 255)
    first = next(iter(DataLoader(pusht(), 32, seed=3, drop_n_last_frames=7)))
    assert torch.equal(converted["observation.image"], first["observation.image"])


def test_ranks_from_the_environment_get_disjoint_shards_of_an_epoch(monkeypatch):
    def indices(loader):
        return [i for batch in loader for i in batch["index"].tolist()]

    everything = indices(DataLoader(pusht(), 16, seed=5))
    monkeypatch.setenv("WORLD_SIZE", "3")
    shards = []
    for rank in range(3):
        monkeypatch.setenv("RANK", str(rank))
        loader = DataLoader(pusht(), 16, seed=5)
        assert (loader.rank, loader.world_size) == (rank, 3)
        shards.append(indices(loader))
    assert len({len(s) for s in shards}) == 1
    # Padded by wrapping around to equal lengths, as DistributedSampler pads.
    assert set().union(*map(set, shards)) == set(everything)
    assert sum(map(len, shards)) - len(everything) < 3
    with pytest.raises(ValueError, match="both rank and world_size"):
        DataLoader(pusht(), 16, rank=0)


def test_set_epoch_and_state_dict_resume_exactly_and_refuse_other_settings():
    def epoch_indices(loader):
        return [batch["index"].tolist() for batch in loader]

    loader = DataLoader(pusht(), 64, seed=9)
    first, second = epoch_indices(loader), epoch_indices(loader)
    assert first != second
    loader.set_epoch(1)
    assert epoch_indices(loader) == second
    loader.set_epoch(0)
    iterator = iter(loader)
    next(iterator)
    next(iterator)
    state = loader.state_dict()
    assert state == {"epoch": 0, "position": 128, "seed": 9, "batch_size": 64, "world_size": 1}
    resumed = DataLoader(pusht(), 64, seed=9)
    resumed.load_state_dict(state)
    assert epoch_indices(resumed) == first[2:]
    for name, value in (("seed", 10), ("batch_size", 32), ("world_size", 2)):
        with pytest.raises(ValueError, match=f"{name}="):
            resumed.load_state_dict({**state, name: value})


def invert(frames):
    return 1 - frames


def test_image_transforms_apply_to_every_camera_frame_as_lerobots_do():
    plain, inverted = pusht(), pusht(image_transforms=invert)
    assert torch.equal(inverted[7]["observation.image"], 1 - plain[7]["observation.image"])
    assert torch.equal(pickle.loads(pickle.dumps(inverted))[7]["observation.image"], 1 - plain[7]["observation.image"])
    batch = next(iter(DataLoader(inverted, 8, seed=1)))
    expected = next(iter(DataLoader(plain, 8, seed=1)))
    assert torch.equal(batch["observation.image"], 1 - expected["observation.image"])


def test_what_is_not_supported_says_so():
    with pytest.raises(NotImplementedError, match="MultiLeRobotDataset"):
        Dataset(["a/b", "c/d"])
    with pytest.raises(NotImplementedError, match="episode_filter"):
        pusht(episode_filter=lambda episode: True)
    with pytest.raises(TypeError, match="lerobot_rs.torch.Dataset"):
        DataLoader(lerobot_rs.Dataset(root=PUSHT))
