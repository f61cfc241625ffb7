"""The wheel from Python (numpy only): samples equal to LeRobot's own (frames to the bit), an
epoch of batches visiting every anchor once, exact resume, and errors that name the file.

The references are those the Rust tests use: datasets written by LeRobot and the samples its
``LeRobotDataset.__getitem__`` returned for them (``tests/fixtures``, see its README).
"""

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import lerobot_rs

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"
DATASETS = [
    FIXTURES / "lerobot-0.6.1" / "pusht_mini",
    FIXTURES / "lerobot-0.6.1" / "pusht_images",
    FIXTURES / "lerobot-0.3.3" / "v21_pusht",
]
DTYPES = {"F32": np.float32, "U8": np.uint8, "I64": np.int64, "BOOL": np.bool_}
DIFFUSION = {
    "observation.image": [-0.1, 0.0],
    "observation.state": [-0.1, 0.0],
    "action": [k / 10 for k in range(-1, 15)],
}


def read_safetensors(path):
    """The tensors and metadata of a safetensors file (its format is a JSON header and raw bytes)."""
    data = path.read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + size])
    metadata = header.pop("__metadata__", {})
    body = data[8 + size :]
    tensors = {}
    for key, entry in header.items():
        start, end = entry["data_offsets"]
        array = np.frombuffer(body[start:end], dtype=DTYPES[entry["dtype"]])
        tensors[key] = array.reshape(entry["shape"])
    return tensors, metadata


@pytest.mark.parametrize("root", DATASETS, ids=lambda p: p.name)
def test_samples_are_lerobots(root):
    references = json.loads((Path(f"{root}.reference") / "references.json").read_text())
    for config, deltas in references["configs"].items():
        folder = Path(f"{root}.reference") / config
        if not folder.exists():
            continue
        as_uint8 = lerobot_rs.Dataset(root=root, delta_timestamps=deltas, frames="uint8")
        as_float = lerobot_rs.Dataset(root=root, delta_timestamps=deltas)
        for index in references["indices"]:
            expected, metadata = read_safetensors(folder / f"{index}.safetensors")
            sample = as_uint8[index]
            assert sample.pop("task") == metadata["task"]
            assert sorted(sample) == sorted(expected), (config, index)
            for key, value in expected.items():
                assert sample[key].dtype == value.dtype, (config, index, key)
                np.testing.assert_array_equal(sample[key], value, err_msg=f"{config} {index} {key}")
            floats = as_float[index]
            # Camera frames are stored as uint8 = round(LeRobot's float32 * 255), losslessly.
            for key in (k for k, v in expected.items() if v.dtype == np.uint8):
                assert floats[key].dtype == np.float32
                np.testing.assert_array_equal(floats[key], expected[key].astype(np.float32) / 255)


def pusht(**kwargs):
    return lerobot_rs.Dataset(root=DATASETS[0], delta_timestamps=DIFFUSION, **kwargs)


def test_len_meta_negative_indices_and_episode_subsets():
    dataset = pusht()
    assert len(dataset) == 836 and dataset.num_episodes == 8
    assert dataset[-1]["index"] == 835
    with pytest.raises(IndexError):
        dataset[836]
    meta = dataset.meta
    assert meta.fps == 10
    assert meta.features["observation.image"]["dtype"] == "video"
    assert meta.stats["action"]["mean"].shape == (2,)
    assert meta.tasks == ["Push the T-shaped block onto the T-shaped target."]
    subset = pusht(episodes=[1, 3])
    assert subset.num_episodes == 2
    assert {int(subset[i]["episode_index"]) for i in range(len(subset))} == {1, 3}


def test_an_epoch_visits_every_anchor_once():
    dataset = pusht()
    loader = lerobot_rs.Loader(dataset, 32, num_workers=2, drop_n_last_frames=7, seed=3)
    for _ in range(2):
        seen = []
        batches = 0
        for batch in loader:
            batches += 1
            assert batch["observation.image"].dtype == np.float32
            assert batch["observation.image"].shape[1:] == (2, 3, 96, 96)
            assert len(batch["task"]) == len(batch["index"])
            seen.extend(batch["index"].tolist())
        assert batches == len(loader)
        # Every frame but each episode's last 7, once.
        assert len(seen) == len(set(seen)) == 836 - 8 * 7


def test_the_blocks_order_gives_every_sample_once_with_the_same_frames():
    dataset = pusht()

    def frames_by_index(loader):
        frames = {}
        for batch in loader:
            for k, index in enumerate(batch["index"].tolist()):
                assert index not in frames
                frames[index] = batch["observation.image"][k].copy()
        return frames

    blocks = frames_by_index(
        lerobot_rs.Loader(dataset, 32, num_workers=2, drop_n_last_frames=7, order="blocks", block_episodes=2)
    )
    lerobot = frames_by_index(lerobot_rs.Loader(dataset, 32, num_workers=2, drop_n_last_frames=7))
    assert blocks.keys() == lerobot.keys() and len(blocks) == 836 - 8 * 7
    assert all(np.array_equal(blocks[i], lerobot[i]) for i in blocks)
    with pytest.raises(ValueError, match=r"lerobot \(default\) or blocks"):
        lerobot_rs.Loader(dataset, 32, order="random")


def test_a_streamed_dataset_gives_the_folders_batches(tmp_path, monkeypatch):
    # The LeRobot-written fixture served as a store (file://): nothing but its metadata is written
    # (under LEROBOT_RS_STREAM_CACHE), and the blocks order's batches are the folder's.
    monkeypatch.setenv("LEROBOT_RS_STREAM_CACHE", str(tmp_path))
    streamed = lerobot_rs.Dataset(root=f"file://{DATASETS[0]}", delta_timestamps=DIFFUSION, streaming=True)
    local = pusht()
    assert len(streamed) == len(local)
    for index in (0, 417, len(local) - 1):
        a, b = streamed[index], local[index]
        assert a.pop("task") == b.pop("task")
        for key in b:
            np.testing.assert_array_equal(a[key], b[key], err_msg=f"{index} {key}")

    def batches(dataset):
        loader = lerobot_rs.Loader(dataset, 32, num_workers=2, drop_n_last_frames=7, order="blocks", block_episodes=2)
        return [(b["index"].copy(), b["observation.image"].copy()) for b in loader]

    for (ia, fa), (ib, fb) in zip(batches(streamed), batches(local), strict=True):
        np.testing.assert_array_equal(ia, ib)
        np.testing.assert_array_equal(fa, fb)
    written = [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()]
    assert written and all("/meta/" in name or name.endswith("versions.json") for name in written), written
    with pytest.raises(lerobot_rs.DatasetError, match="not a URL"):
        lerobot_rs.Dataset(root=str(DATASETS[0]), streaming=True)


def test_loaders_running_at_once_in_one_process_give_the_batches_each_gives_alone():
    import threading

    def epoch(make):
        return [
            (batch["index"].tolist(), batch["observation.image"].tobytes(), batch["action"].tobytes())
            for batch in make()
        ]

    video = lambda: lerobot_rs.Loader(pusht(), 32, num_workers=2, seed=3, order="blocks", block_episodes=2)
    images = lambda: lerobot_rs.Loader(
        lerobot_rs.Dataset(root=DATASETS[1], delta_timestamps=DIFFUSION), 16, num_workers=1, seed=4
    )
    alone = [epoch(video), epoch(images)]
    together = [None] * 4

    def run(i, make):
        together[i] = epoch(make)

    threads = [threading.Thread(target=run, args=(i, make)) for i, make in enumerate([video, images] * 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(run is not None and len(run) > 0 for run in together)
    assert together[0] == alone[0] and together[2] == alone[0], "the video loader beside others"
    assert together[1] == alone[1] and together[3] == alone[1], "the image loader beside others"


def test_a_loader_resumed_from_its_state_dict_continues_exactly():
    dataset = pusht()

    def indices(loader, count):
        out = []
        while len(out) < count:
            out.extend(batch["index"].tolist() for batch in loader)
        return out[:count]

    straight = lerobot_rs.Loader(dataset, 16, num_workers=1, seed=5)
    first = [batch["index"].tolist() for _, batch in zip(range(10), straight)]
    state = straight.state_dict()
    rest = indices(straight, 60)

    resumed = lerobot_rs.Loader(dataset, 16, num_workers=2, seed=5)
    resumed.load_state_dict(state)
    assert indices(resumed, 60) == rest
    assert state == {"epoch": 0, "position": 160} and first


def test_errors_name_the_file_and_field(tmp_path):
    broken = tmp_path / "pusht_mini"
    shutil.copytree(DATASETS[0], broken)
    info = json.loads((broken / "meta" / "info.json").read_text())
    info["fps"] = "ten"
    (broken / "meta" / "info.json").write_text(json.dumps(info))
    with pytest.raises(lerobot_rs.DatasetError, match=r"info\.json.*fps"):
        lerobot_rs.Dataset(root=broken)

    shutil.rmtree(broken)
    shutil.copytree(DATASETS[0], broken)
    video = next((broken / "videos").rglob("*.mp4"))
    video.write_bytes(video.read_bytes()[:2000])
    dataset = lerobot_rs.Dataset(root=broken, delta_timestamps=DIFFUSION)
    with pytest.raises(lerobot_rs.DatasetError, match=video.name):
        dataset[0]
    loader = lerobot_rs.Loader(dataset, 8, num_workers=2)
    with pytest.raises(lerobot_rs.DatasetError, match=video.name):
        for _ in loader:
            pass

    with pytest.raises(lerobot_rs.DatasetError, match="no-such-folder"):
        lerobot_rs.Dataset(root=tmp_path / "no-such-folder")
    with pytest.raises(ValueError, match="frames"):
        lerobot_rs.Dataset(root=DATASETS[0], frames="float16")


def test_batches_view_the_loaders_buffers_and_keep_them_while_held():
    dataset = pusht(frames="uint8")
    loader = lerobot_rs.Loader(dataset, 16, num_workers=2, prefetch=2, seed=9)
    batches = iter(loader)
    held = next(batches)
    frames = held["observation.image"]
    # No copy: the arrays view the batch's buffers (numpy does not own their data).
    assert frames.dtype == np.uint8 and not frames.flags.owndata and frames.base is not None
    copies = {key: np.array(value, copy=True) for key, value in held.items() if key != "task"}
    # Later batches reuse only buffers that no array views any more: the held one is untouched.
    for _, batch in zip(range(12), batches):
        del batch
    for key, value in copies.items():
        np.testing.assert_array_equal(held[key], value, err_msg=key)
    # And it is what the dataset returns for those frames.
    for row, index in enumerate(held["index"][:3]):
        np.testing.assert_array_equal(frames[row], dataset[int(index)]["observation.image"])


def test_torch_tensors_share_the_arrays_memory():
    torch = pytest.importorskip("torch")
    dataset = lerobot_rs.Dataset(root=DATASETS[0], delta_timestamps=DIFFUSION, as_torch=True)
    sample = dataset[5]
    assert sample["observation.image"].dtype == torch.float32
    assert sample["action_is_pad"].dtype == torch.bool and sample["index"].dtype == torch.int64
    numpy_sample = pusht()[5]
    for key, value in numpy_sample.items():
        if key != "task":
            np.testing.assert_array_equal(sample[key].numpy(), value, err_msg=key)
    loader = lerobot_rs.Loader(dataset, 8, num_workers=1)  # torch, as the dataset
    batch = next(iter(loader))
    assert batch["observation.image"].shape == (8, 2, 3, 96, 96)
    assert batch["observation.image"].dtype == torch.float32
    assert isinstance(batch["task"], list)
    with pytest.raises(ValueError, match="as_torch"):
        lerobot_rs.Loader(pusht(), 8, pin_memory=True)


def test_ctrl_c_interrupts_a_wait_for_a_batch(tmp_path):
    # The dataset's video is a FIFO: the loader's worker blocks opening it until the script opens
    # its other end, and then reading it until the script closes that. So the signal is sent once
    # the worker is inside the batch, and the batch cannot be ready before the interrupt is
    # handled, however loaded the machine. (A timer against a slow batch, as before, could lose.)
    # The process then exits once the batch being made has failed (the producer is joined).
    # Python installs its Ctrl-C handler only where SIGINT is not ignored, and a background job of
    # a script (or nohup's child) inherits it ignored: the script installs the handler itself, so
    # the test does not depend on how the test run was started (ignored, it waited for ever).
    root = tmp_path / "pusht_mini"
    shutil.copytree(DATASETS[0], root)
    video = next((root / "videos").rglob("*.mp4"))
    video.unlink()
    os.mkfifo(video)
    script = f"""
import os, signal, threading, lerobot_rs
signal.signal(signal.SIGINT, signal.default_int_handler)
dataset = lerobot_rs.Dataset(root={str(root)!r})
loader = lerobot_rs.Loader(dataset, 8, num_workers=1)
writer = []
def interrupt_once_the_worker_reads():
    writer.append(os.open({str(video)!r}, os.O_WRONLY))  # returns once the worker opened it
    os.kill(os.getpid(), signal.SIGINT)
try:
    threading.Thread(target=interrupt_once_the_worker_reads, daemon=True).start()
    next(iter(loader))
    print("no interrupt: a batch came")
except KeyboardInterrupt:
    print("interrupted")
finally:
    for fd in writer:
        os.close(fd)  # the worker reads the end of the file: its batch fails, the producer ends
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "interrupted", done.stdout + done.stderr


def test_an_automatic_frame_cache_is_built_once_and_gives_the_same_batches(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("LEROBOT_RS_FRAME_CACHE", str(tmp_path))
    caplog.set_level("INFO", logger="lerobot_rs")
    dataset = pusht()
    plain = lerobot_rs.Loader(dataset, 16, num_workers=1, seed=5)
    built = lerobot_rs.Loader(dataset, 16, num_workers=1, seed=5, frame_cache="auto")
    assert plain.frame_cache is None
    assert Path(built.frame_cache).is_relative_to(tmp_path) and any(Path(built.frame_cache).iterdir())
    assert "decoding every frame once" in caplog.text
    caplog.clear()
    again = lerobot_rs.Loader(dataset, 16, num_workers=2, seed=5, frame_cache="auto")
    assert again.frame_cache == built.frame_cache
    assert "reading the decoded frames in" in caplog.text
    for a, b, c in zip(plain, built, again):
        assert a.keys() == b.keys() == c.keys()
        for key, value in a.items():
            if isinstance(value, np.ndarray):
                assert np.array_equal(value, b[key]) and np.array_equal(value, c[key]), key
            else:
                assert value == b[key] == c[key], key


def test_an_automatic_frame_cache_over_its_budget_is_not_built(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("LEROBOT_RS_FRAME_CACHE", str(tmp_path))
    caplog.set_level("INFO", logger="lerobot_rs")
    loader = lerobot_rs.Loader(pusht(), 16, frame_cache="auto", frame_cache_budget_gb=0.0)
    assert loader.frame_cache is None and not any(tmp_path.iterdir())
    assert "over the budget" in caplog.text
    assert len(next(iter(loader))["index"]) == 16
