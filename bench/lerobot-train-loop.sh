#!/usr/bin/env bash
# LeRobot 0.6.1's own training loop (`lerobot-train`) with its DataLoader, then with ours
# (`python -m lerobot_rs.train`), same flags: the mean data wait (`data_s`) and update time
# (`updt_s`) LeRobot logs over the second half of the steps, and the wall time of each run.
#
#   bench/lerobot-train-loop.sh PYTHON DATASET_ROOT [LEROBOT-TRAIN FLAGS...]
#
# PYTHON: an interpreter with lerobot[training]==0.6.1 and this wheel (scripts/test-with-lerobot.sh
# makes one: target/test-lerobot/bin/python). The flags after the dataset are passed to both
# runs (e.g. --batch_size=64 --num_workers=2 --steps=40 --policy.device=cuda).
set -euo pipefail
python=$1 root=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
steps=40
for arg in "$@"; do [[ $arg == --steps=* ]] && steps=${arg#--steps=}; done
for mode in lerobot lerobot_rs; do
  if [[ $mode == lerobot ]]; then entry=(-m lerobot.scripts.lerobot_train); else entry=(-m lerobot_rs.train); fi
  start=$(date +%s.%N)
  HF_HUB_OFFLINE=1 LEROBOT_RS_FRAME_CACHE="$work/frames" "$python" "${entry[@]}" \
    --dataset.repo_id="local/$(basename "$root")" --dataset.root="$root" --policy.type=diffusion \
    --policy.push_to_hub=false --policy.pretrained_backbone_weights=null --policy.use_group_norm=true \
    --save_checkpoint=false --wandb.enable=false --output_dir="$work/out-$mode" \
    --steps="$steps" --log_freq=$((steps / 2)) "$@" >"$work/$mode.log" 2>&1 \
    || { tail -20 "$work/$mode.log"; exit 1; }
  wall=$(awk "BEGIN { print $(date +%s.%N) - $start }")
  last=$(grep -o 'step:[^ ]* .*' "$work/$mode.log" | tail -1)
  printf '%-10s wall %6.1f s | %s\n' "$mode" "$wall" "$last"
done
