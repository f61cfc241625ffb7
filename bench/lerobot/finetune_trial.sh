#!/usr/bin/env bash
# A LeRobot user's fine-tune, end to end, with LeRobot 0.6.1 on both ends (issue 34):
# LeRobot writes a pretrained Diffusion Policy, our trainer fine-tunes from it (--policy.path),
# and LeRobot loads the checkpoint's pretrained_model/ strictly and predicts the actions our
# trainer predicts for the same observations and noise (check_export.py).
#
#   PYTHON=/path/to/lerobot-venv/bin/python bash bench/lerobot/finetune_trial.sh [WORK_DIR]
#
# PYTHON: an environment with LeRobot 0.6.1 (../shared/anchors/setup.sh). Needs a release build
# of the trainer (cargo build --release -p trainer).
set -euo pipefail
PYTHON=${PYTHON:-python}
WORK=${1:-$(mktemp -d)}
DATASET=tests/fixtures/lerobot-0.6.1/pusht_images
TRAINER=target/release/trainer
rm -rf "$WORK/lerobot_policy" "$WORK/finetune"
"$PYTHON" bench/lerobot/write_policy.py --root "$DATASET" --out "$WORK/lerobot_policy"
LEROBOT_RS_FRAME_CACHE="$WORK/frame-cache" "$TRAINER" --dataset.root "$DATASET" \
    --policy.path "$WORK/lerobot_policy" --steps 20 --log_freq 5 --save_freq 20 --output_dir "$WORK/finetune"
"$PYTHON" bench/lerobot/check_export.py --export "$WORK/finetune/checkpoints/000020/pretrained_model" \
    --checkpoint "$WORK/finetune" --root "$DATASET" --trainer "$TRAINER" --indices 0,17,40
