"""Runs LeRobot 0.6.1's `lerobot-train` for a few steps, with LeRobot's own DataLoader
(`lerobot`) or with lerobot_rs's loader (`lerobot_rs`), and saves every training batch (as the
policy receives it) and every loss to a file: `python train_and_record.py MODE OUT FLAGS...`.
"""

import sys

import torch
from lerobot.scripts import lerobot_train

mode, out = sys.argv[1], sys.argv[2]
sys.argv = [sys.argv[0], *sys.argv[3:]]
record = {"batches": [], "losses": []}
update_policy = lerobot_train.update_policy


def recording_update_policy(tracker, policy, batch, *args, **kwargs):
    record["batches"].append({k: v.clone() for k, v in batch.items() if isinstance(v, torch.Tensor)})
    tracker, output = update_policy(tracker, policy, batch, *args, **kwargs)
    record["losses"].append(tracker.loss.val)
    return tracker, output


lerobot_train.update_policy = recording_update_policy
if mode == "lerobot":
    lerobot_train.main()
else:
    from lerobot_rs import train

    train.main()
torch.save(record, out)
