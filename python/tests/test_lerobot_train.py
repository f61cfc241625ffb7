"""`python -m lerobot_rs.train` is `lerobot-train` with our loader: a few steps of LeRobot 0.6.1's
own Diffusion Policy training, run both ways from the same seed, see the same batches, equal to
the bit, and the same losses, across an epoch's end, on a subset of episodes.

Runs where LeRobot 0.6.1 is installed (`scripts/test-with-lerobot.sh`); skipped elsewhere.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
lerobot = pytest.importorskip("lerobot")

HERE = Path(__file__).resolve().parent
PUSHT = HERE.parents[1] / "tests" / "fixtures" / "lerobot-0.6.1" / "pusht_mini"


def train_and_record(mode, tmp_path):
    out = tmp_path / f"{mode}.pt"
    flags = [
        "--dataset.repo_id=local/pusht_mini",
        f"--dataset.root={PUSHT}",
        "--dataset.episodes=[1,3]",
        "--policy.type=diffusion",
        "--policy.device=cpu",
        "--policy.push_to_hub=false",
        # Small, and no weights to download.
        "--policy.down_dims=[32,64]",
        "--policy.pretrained_backbone_weights=null",
        "--policy.use_group_norm=true",
        # Episodes 1 and 3 less the 7 last frames of each: 218 frames, 7 batches an epoch (the
        # last of 26); 8 steps cross its end.
        "--batch_size=32",
        "--steps=8",
        "--num_workers=0",
        "--seed=1000",
        f"--output_dir={tmp_path / f'out-{mode}'}",
        "--save_checkpoint=false",
        "--wandb.enable=false",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LEROBOT_RS_FRAME_CACHE": str(tmp_path / "frames")}
    run = subprocess.run(
        [sys.executable, str(HERE / "lerobot" / "train_and_record.py"), mode, str(out), *flags],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    return torch.load(out), run.stderr


@pytest.mark.skipif(lerobot.__version__ != "0.6.1", reason="drives LeRobot 0.6.1's training loop")
def test_lerobot_train_with_our_loader_sees_lerobots_batches_and_losses(tmp_path):
    theirs, _ = train_and_record("lerobot", tmp_path)
    ours, log = train_and_record("lerobot_rs", tmp_path)
    assert "training batches from 1 native threads" in log
    assert len(ours["batches"]) == len(theirs["batches"]) == 8
    sizes = [len(batch["index"]) for batch in theirs["batches"]]
    assert sizes[:4] == [32, 32, 32, 32] and 32 > min(sizes), "the steps cross an epoch's end"
    for step, (a, b) in enumerate(zip(ours["batches"], theirs["batches"])):
        assert sorted(a) == sorted(b), step
        for key in b:
            assert a[key].dtype == b[key].dtype and torch.equal(a[key], b[key]), (step, key)
    assert ours["losses"] == theirs["losses"]
